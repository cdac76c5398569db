package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// cmdCompare prints, per mode and concurrency, the median throughput of
// two revisions over several rounds and the ratio HEAD/BASE (bench/compare.sh).
// Each argument is a directory of one round's -json results; -base and
// -head take comma-separated lists of them.
func cmdCompare(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	base := fs.String("base", "", "comma-separated result directories of the base revision, one per round")
	head := fs.String("head", "", "comma-separated result directories of the head revision, one per round")
	baseName := fs.String("base-name", "BASE", "the base revision's name in the table")
	headName := fs.String("head-name", "HEAD", "the head revision's name in the table")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *base == "" || *head == "" {
		return usagef("usage: authbench compare -base DIR[,DIR…] -head DIR[,DIR…]")
	}
	b, err := loadRounds(strings.Split(*base, ","))
	if err != nil {
		return err
	}
	h, err := loadRounds(strings.Split(*head, ","))
	if err != nil {
		return err
	}
	writeComparison(stdout, *baseName, *headName, b, h)
	return nil
}

// runKey names a row: the run's label (or mode) and its concurrency.
type runKey struct {
	name string
	c    int
}

// roundRates maps each row to its throughput in each round.
type roundRates map[runKey][]float64

func loadRounds(dirs []string) (roundRates, error) {
	out := roundRates{}
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("%s: no results", dir)
		}
		for _, name := range files {
			rs, err := readResults(name)
			if err != nil {
				return nil, err
			}
			for _, r := range rs {
				n := r.Label
				if n == "" {
					n = r.Mode
				}
				k := runKey{n, r.Concurrency}
				out[k] = append(out[k], r.Rate)
			}
		}
	}
	return out, nil
}

func readResults(name string) ([]*result, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rs []*result
	dec := json.NewDecoder(f)
	for {
		var r result
		err := dec.Decode(&r)
		if errors.Is(err, io.EOF) {
			return rs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		rs = append(rs, &r)
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// writeComparison prints one Markdown row per mode measured on both sides.
func writeComparison(w io.Writer, baseName, headName string, base, head roundRates) {
	var keys []runKey
	for k := range base {
		if _, ok := head[k]; ok {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].c != keys[j].c {
			return keys[i].c < keys[j].c
		}
		if ri, rj := modeRank(keys[i].name), modeRank(keys[j].name); ri != rj {
			return ri < rj
		}
		return keys[i].name < keys[j].name
	})
	fmt.Fprintf(w, "| mode | c | %s ok/s (rounds) | %s median | %s ok/s (rounds) | %s median | %s / %s |\n",
		baseName, baseName, headName, headName, headName, baseName)
	fmt.Fprintln(w, "|---|---:|---|---:|---|---:|---:|")
	for _, k := range keys {
		bm, hm := median(base[k]), median(head[k])
		ratio := "–"
		if bm > 0 {
			ratio = fmt.Sprintf("%.2f", hm/bm)
		}
		fmt.Fprintf(w, "| %s | %d | %s | %.0f | %s | %.0f | %s |\n", k.name, k.c, rates(base[k]), bm, rates(head[k]), hm, ratio)
	}
}

func rates(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.0f", x)
	}
	return strings.Join(s, ", ")
}
