package main

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

const versionUsage = `usage: authd version

Prints the module version, the VCS revision the binary was built from (with
"modified" when the work tree had uncommitted changes), the commit time and
the Go version, from the build information the go command stamps into it.
`

// cmdVersion prints the build information of the binary.
func cmdVersion(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	if err := parseNoArgs(fs, versionUsage, args, func(string) string { return "" }, stdout); err != nil {
		return helpOK(err)
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		fmt.Fprintf(stdout, "authd (no build information)\n  go        %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return nil
	}
	writeVersion(stdout, bi)
	return nil
}

// writeVersion formats build information: the module and its version, the
// VCS revision, time and modified flag, and the Go version.
func writeVersion(w io.Writer, bi *debug.BuildInfo) {
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	version := bi.Main.Version
	if version == "" {
		version = "(devel)"
	}
	rev := settings["vcs.revision"]
	switch {
	case rev == "":
		rev = "unknown (built without VCS information, e.g. -buildvcs=false or outside a git work tree)"
	case settings["vcs.modified"] == "true":
		rev += " (modified)"
	}
	fmt.Fprintf(w, "authd %s\n", version)
	fmt.Fprintf(w, "  module    %s\n", bi.Main.Path)
	fmt.Fprintf(w, "  revision  %s\n", rev)
	if t := settings["vcs.time"]; t != "" {
		fmt.Fprintf(w, "  time      %s\n", t)
	}
	fmt.Fprintf(w, "  go        %s %s/%s\n", bi.GoVersion, settings["GOOS"], settings["GOARCH"])
}
