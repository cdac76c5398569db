package main

import (
	"flag"
	"maps"
	"slices"
	"strings"

	"github.com/authd/authd/storage"
)

// subcommandUsage is the usage text of "authd CMD SUB" (name "CMD SUB"),
// which "authd CMD SUB -h" prints above its flags: its own usage line,
// then what it does.
func subcommandUsage(name string, args []string, about string) string {
	line := append([]string{"usage: authd", name}, args...)
	return strings.Join(append(line, "[flags]"), " ") + "\n\n" + about + "\n"
}

// subcommands are the subcommands of each command that has them, each with
// a usage of its own ("authd users add -h").
func subcommands() map[string][]string {
	return map[string][]string{
		"migrate":   slices.Sorted(maps.Keys(migrateCommands)),
		"users":     slices.Sorted(maps.Keys(usersCommands)),
		"clients":   slices.Sorted(maps.Keys(clientsCommands)),
		"providers": slices.Sorted(maps.Keys(providersCommands)),
		"jobs":      {"list"},
		"keys":      slices.Sorted(maps.Keys(keysCommands)),
	}
}

// flagSets are the flag sets of every command and subcommand: the
// settings authd reads (knownSettings).
func flagSets() []*flag.FlagSet {
	var c config
	server := flag.NewFlagSet("serve", flag.ContinueOnError)
	c.flags(server, true)
	var once bool
	var filter storage.JobFilter
	var status string
	sets := []*flag.FlagSet{server, janitorFlagSet(&c, &once), jobsFlagSet(&c, &filter, &status), keysFlagSet("keys", &c, &keysConfig{})}
	for name := range usersCommands {
		sets = append(sets, usersFlagSet(name, &c, &usersOptions{}))
	}
	for name := range clientsCommands {
		sets = append(sets, clientsFlagSet(name, &c, &clientsOptions{}))
	}
	return sets
}
