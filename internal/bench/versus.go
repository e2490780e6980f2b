package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// VersusNCCL renders, for every world size and mode, one table of the time
// ratio of irisgen's best variant to NCCL at its best (best of its buffer
// kinds and placements), a row per collective and a column per size: below
// 1 irisgen is faster. The best variant is the fastest by median among
// those whose cell is not stalled (Row.Stalled); a cell where every
// variant stalled shows the fastest, marked. The last column is the
// geometric mean of the ratios at 1 MiB and below. rows are as Markdown
// takes them (BestNCCL applied); "" when no cell has both.
func VersusNCCL(rows []Row) string {
	type key struct {
		world      int
		mode, coll string
		bytes      int64
	}
	type best struct {
		iris, nccl Row
		stalled    bool
	}
	cells := map[key]*best{}
	for _, r := range rows {
		if r.Bytes == 0 || r.Overlap() || r.Forced() || math.IsNaN(r.TimeUS) || r.TimeUS <= 0 || math.IsInf(r.TimeUS, 0) {
			continue
		}
		k := key{r.World, r.Mode, r.Collective, r.Bytes}
		c := cells[k]
		if c == nil {
			c = &best{}
			cells[k] = c
		}
		switch r.Impl {
		case "nccl":
			if c.nccl.Impl == "" || r.TimeUS < c.nccl.TimeUS {
				c.nccl = r
			}
		case "irisgen":
			st := r.Stalled()
			switch {
			case c.iris.Impl == "", c.stalled && !st, c.stalled == st && r.TimeUS < c.iris.TimeUS:
				c.iris, c.stalled = r, st
			}
		}
	}
	type table struct {
		world int
		mode  string
	}
	var tables []table
	colls := map[table][]string{}
	sizes := map[table][]int64{}
	for k, c := range cells {
		if c.iris.Impl == "" || c.nccl.Impl == "" {
			continue
		}
		t := table{k.world, k.mode}
		if _, ok := colls[t]; !ok {
			tables = append(tables, t)
		}
		if !slices.Contains(colls[t], k.coll) {
			colls[t] = append(colls[t], k.coll)
		}
		if !slices.Contains(sizes[t], k.bytes) {
			sizes[t] = append(sizes[t], k.bytes)
		}
	}
	if len(tables) == 0 {
		return ""
	}
	slices.SortFunc(tables, func(a, b table) int {
		if a.world != b.world {
			return a.world - b.world
		}
		return strings.Compare(a.mode, b.mode)
	})
	var b strings.Builder
	b.WriteString("## irisgen's best variant against NCCL at its best\n\n")
	b.WriteString("Time ratio, medians (below 1: irisgen is faster); " + stallMark + ": every variant of the cell had a repeat over 3x its fastest.\n\n")
	for _, t := range tables {
		slices.Sort(colls[t])
		slices.Sort(sizes[t])
		fmt.Fprintf(&b, "### %d GPUs, %s\n\n| collective |", t.world, t.mode)
		for _, s := range sizes[t] {
			fmt.Fprintf(&b, " %s |", HumanBytes(s))
		}
		b.WriteString(" geomean <= 1 MiB |\n|---|")
		for range sizes[t] {
			b.WriteString("---|")
		}
		b.WriteString("---|\n")
		lose, stalled, n := 0, 0, 0
		for _, coll := range colls[t] {
			fmt.Fprintf(&b, "| %s |", coll)
			logs, small := 0.0, 0
			for _, s := range sizes[t] {
				c := cells[key{t.world, t.mode, coll, s}]
				if c == nil || c.iris.Impl == "" || c.nccl.Impl == "" {
					b.WriteString(" - |")
					continue
				}
				ratio := c.iris.TimeUS / c.nccl.TimeUS
				n++
				mark := ""
				if c.stalled {
					mark, stalled = " "+stallMark, stalled+1
				}
				if ratio > 1 {
					lose++
				}
				fmt.Fprintf(&b, " %.2f%s |", ratio, mark)
				if s <= 1<<20 {
					logs += math.Log(ratio)
					small++
				}
			}
			if small > 0 {
				fmt.Fprintf(&b, " %.2f |\n", math.Exp(logs/float64(small)))
			} else {
				b.WriteString(" - |\n")
			}
		}
		fmt.Fprintf(&b, "\n%d of %d cells slower than NCCL, %d stalled.\n\n", lose, n, stalled)
	}
	return b.String()
}
