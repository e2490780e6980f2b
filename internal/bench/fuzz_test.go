package bench

import (
	"bytes"
	"testing"
)

// FuzzReport feeds bench -report's path (ReadCSV, then every report and
// Tune and Compare over the rows) any bytes: a CSV a user hands -report or
// -compare may be truncated, edited or another tool's. It must be read or
// refused with an error, never panic; rows it reads write back to a CSV
// that reads to as many rows.
func FuzzReport(f *testing.F) {
	var b bytes.Buffer
	rows := sample()
	rows = append(rows, Row{Impl: "irisgen", Collective: "all_reduce", Variant: "ring", DType: "bf16", World: 2, Bytes: 8 << 10,
		Mode: "eager", TimeUS: 3, MinUS: 2, MaxUS: 9, Repeats: 7, Barrier: "none"})
	if err := WriteCSV(&b, rows); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Add([]byte("impl,collective,variant,dtype,world,bytes,mode,time_us,algbw_gbps,busbw_gbps,device,date,note\n"))
	f.Add([]byte("impl,collective\nx,y\n"))
	f.Add([]byte("impl,collective,variant,dtype,world,bytes,mode,time_us,algbw_gbps,busbw_gbps,device,date,note\n" +
		"irisgen,all_gather,push,bf16,0,-1,graph,nan,nan,nan,d,t,\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := ReadCSV(bytes.NewReader(data))
		if err != nil {
			return
		}
		shown := BestNCCL(rows)
		_ = OverlapMarkdown(rows) + VersusNCCL(shown) + Markdown(shown) + FusionTable(shown)
		dir := t.TempDir()
		_, _ = Plot(shown, dir)
		_, _ = PlotOverlap(rows, dir)
		_ = FormatCompare(Compare(rows, rows, 0))
		for _, r := range rows {
			_, _ = Tune(rows, r.Collective, r.DType, r.Mode, func(a, b string) bool { return a < b })
		}
		var out bytes.Buffer
		if err := WriteCSV(&out, rows); err != nil {
			t.Fatalf("rows read from the CSV do not write back: %v", err)
		}
		again, err := ReadCSV(&out)
		if err != nil {
			t.Fatalf("a CSV written from read rows does not read: %v\n%s", err, out.Bytes())
		}
		if len(again) != len(rows) {
			t.Fatalf("%d rows written, %d read back", len(rows), len(again))
		}
	})
}
