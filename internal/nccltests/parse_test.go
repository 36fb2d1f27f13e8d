package nccltests

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

const datasetDir = "../cost/testdata/nccl"

// datasetFiles lists every file of the fidelity dataset with what it must parse to.
// A file in the directory but not in this table fails the test, so each new file
// states its expected reading here.
var datasetFiles = []struct {
	file                  string
	coll                  Collective
	ranks, nodes, perNode int
	points                int
	firstBytes, lastBytes int64
	hosts                 int // distinct hosts read from a complete device list; 0 when none
	inPlace               bool
}{
	{"aws-p4de-a100-2x8-allreduce.txt", AllReduce, 16, 2, 8, 29, 8, 2147483648, 0, true},
	{"aws-p5-h100-1x8-allreduce.txt", AllReduce, 8, 1, 8, 32, 8, 17179869184, 0, true},
	{"aws-p5-h100-2x8-allreduce.txt", AllReduce, 16, 2, 8, 32, 8, 17179869184, 0, true},
	{"coreweave-gb200-1rack-72-allreduce.txt", AllReduce, 72, 18, 4, 5, 536870912, 8589934592, 0, true},
	{"coreweave-gb200-2rack-128-allreduce.txt", AllReduce, 128, 32, 4, 6, 536870912, 17179869184, 0, true},
	{"coreweave-gb200-20rack-1440-allreduce.txt", AllReduce, 1440, 360, 4, 6, 536870912, 17179869184, 0, true},
	{"oci-a100-2x8-allreduce.txt", AllReduce, 16, 2, 8, 3, 1073741824, 4294967296, 2, true},
	{"oci-gb200-2rack-128-allreduce.txt", AllReduce, 128, 32, 4, 33, 8, 34359738368, 0, true},
	{"oci-b4-a100-2x8-allreduce.txt", AllReduce, 16, 2, 8, 4, 1073741824, 8589934592, 0, true},
	{"oci-gb200-1x4-allreduce.txt", AllReduce, 4, 1, 4, 2, 4294967296, 8589934592, 1, true},
	{"oci-gb200-48x4-allreduce.txt", AllReduce, 192, 48, 4, 2, 4294967296, 8589934592, 0, true},
	{"oci-gb200-1x4-alltoall.txt", AllToAll, 4, 1, 4, 2, 4294967296, 8589934592, 0, true},
	{"oci-gb200-16x4-alltoall.txt", AllToAll, 64, 16, 4, 2, 4294967296, 8589934592, 0, true},
	{"oci-gb200-32x4-alltoall.txt", AllToAll, 128, 32, 4, 2, 4294967296, 8589934592, 0, true},
	{"dstack-crusoe-a100-2x8-allreduce.txt", AllReduce, 16, 2, 8, 29, 8, 2147483648, 0, true},
	{"dstack-gcp-a3mega-h100-2x8-allgather.txt", AllGather, 16, 2, 8, 11, 8388608, 8589934592, 0, true},
	{"dstack-gcp-a4-b200-2x8-allreduce.txt", AllReduce, 16, 2, 8, 11, 8388608, 8589934592, 0, true},
	{"dstack-lambda-b200-2x8-allreduce.txt", AllReduce, 16, 2, 8, 29, 8, 2147483648, 0, true},
	{"dstack-nebius-h100-2x8-allreduce.txt", AllReduce, 16, 2, 8, 31, 8, 8589934592, 0, true},
	{"gcp-a3mega-h100-2x8-allreduce.txt", AllReduce, 16, 2, 8, 31, 8, 8589934592, 2, true},
	{"gcp-a3ultra-h200-2x1-allgather.txt", AllGather, 2, 2, 1, 24, 1024, 8589934592, 2, true},
	{"gcp-a3ultra-h200-2x1-allreduce.txt", AllReduce, 2, 2, 1, 24, 1024, 8589934592, 2, true},
	{"gcp-a4-b200-1x2-allgather.txt", AllGather, 2, 1, 2, 8, 67108864, 8589934592, 1, true},
	{"gcp-a4-b200-2x1-allgather.txt", AllGather, 2, 2, 1, 28, 0, 1073741824, 2, true},
	{"gcp-a4-b200-2x8-allgather.txt", AllGather, 16, 2, 8, 24, 1024, 8589934592, 2, true},
	{"liplus-a100-1x8-sendrecv.txt", SendRecv, 8, 1, 8, 4, 134217728, 1073741824, 0, true},
	{"skypilot-gcp-a3ultra-h200-2x8-allgather.txt", AllGather, 16, 2, 8, 24, 1024, 8589934592, 2, true},
	{"xxrjun-c00-h100-2x1-sendrecv.txt", SendRecv, 2, 2, 1, 10, 33554432, 17179869184, 2, true},
	{"xxrjun-c00-h100-2x8-alltoall.txt", AllToAll, 16, 2, 8, 10, 33554432, 17179869184, 2, true},
	{"xxrjun-h100-10x1-allgather.txt", AllGather, 10, 10, 1, 10, 33554400, 17179869120, 10, true},
	{"xxrjun-h100-10x1-allreduce.txt", AllReduce, 10, 10, 1, 10, 33554432, 17179869184, 10, true},
	{"xxrjun-h100-10x1-alltoall.txt", AllToAll, 10, 10, 1, 10, 33554400, 17179869120, 10, true},
	{"xxrjun-h100-10x1-reducescatter.txt", ReduceScatter, 10, 10, 1, 10, 33554400, 17179869120, 10, true},
	{"xxrjun-h100-10x1-sendrecv.txt", SendRecv, 10, 10, 1, 10, 33554432, 17179869184, 10, true},
	{"xxrjun-h100-10x8-allgather.txt", AllGather, 80, 10, 8, 10, 33553920, 17179868160, 10, true},
	{"xxrjun-h100-10x8-allreduce.txt", AllReduce, 80, 10, 8, 10, 33554432, 17179869184, 10, true},
	{"xxrjun-h100-10x8-alltoall.txt", AllToAll, 80, 10, 8, 10, 33553920, 17179868160, 10, true},
	{"xxrjun-h100-10x8-reducescatter.txt", ReduceScatter, 80, 10, 8, 10, 33553920, 17179868160, 10, true},
	{"xxrjun-h100-10x8-sendrecv.txt", SendRecv, 80, 10, 8, 10, 33554432, 17179869184, 10, true},
	{"xxrjun-h100-1x8-allgather.txt", AllGather, 8, 1, 8, 10, 33554432, 17179869184, 1, true},
	{"xxrjun-h100-1x8-allreduce.txt", AllReduce, 8, 1, 8, 10, 33554432, 17179869184, 1, true},
	{"xxrjun-h100-1x8-alltoall.txt", AllToAll, 8, 1, 8, 10, 33554432, 17179869184, 1, true},
	{"xxrjun-h100-1x8-reducescatter.txt", ReduceScatter, 8, 1, 8, 10, 33554432, 17179869184, 1, true},
	{"xxrjun-h100-1x8-sendrecv.txt", SendRecv, 8, 1, 8, 10, 33554432, 17179869184, 1, true},
}

// requiredKeys are the provenance keys every dataset file carries.
var requiredKeys = []string{"source", "hardware", "collective", "ranks", "nodes", "gpus_per_node", "profile", "scope"}

func parseFile(t *testing.T, path string) *Result {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := Parse(f)
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(path), err)
	}
	return r
}

func TestDatasetFilesParse(t *testing.T) {
	onDisk, err := filepath.Glob(filepath.Join(datasetDir, "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, tc := range datasetFiles {
		listed[tc.file] = true
	}
	for _, p := range onDisk {
		if !listed[filepath.Base(p)] {
			t.Errorf("%s is in the dataset but not in datasetFiles", filepath.Base(p))
		}
	}
	heldOut := 0
	for _, tc := range datasetFiles {
		t.Run(tc.file, func(t *testing.T) {
			r := parseFile(t, filepath.Join(datasetDir, tc.file))
			if r.Collective != tc.coll || r.Ranks != tc.ranks || r.Nodes != tc.nodes || r.GPUsPerNode != tc.perNode {
				t.Errorf("read %s ranks %d nodes %d gpus/node %d, want %s %d %d %d", r.Collective, r.Ranks, r.Nodes, r.GPUsPerNode, tc.coll, tc.ranks, tc.nodes, tc.perNode)
			}
			if len(r.Points) != tc.points {
				t.Fatalf("%d points, want %d", len(r.Points), tc.points)
			}
			if first, last := r.Points[0].Bytes, r.Points[len(r.Points)-1].Bytes; first != tc.firstBytes || last != tc.lastBytes {
				t.Errorf("sizes %d..%d, want %d..%d", first, last, tc.firstBytes, tc.lastBytes)
			}
			if len(r.Hosts) != tc.hosts {
				t.Errorf("%d hosts %v, want %d", len(r.Hosts), r.Hosts, tc.hosts)
			}
			for i, p := range r.Points {
				if (p.InPlace != nil) != tc.inPlace {
					t.Errorf("row %d (line %d): in-place group present %v, want %v", i, p.Line, p.InPlace != nil, tc.inPlace)
				}
				if i > 0 && p.Bytes < r.Points[i-1].Bytes {
					t.Errorf("line %d: size %d falls below the previous row's %d", p.Line, p.Bytes, r.Points[i-1].Bytes)
				}
			}
			for _, k := range requiredKeys {
				if r.Header[k] == "" {
					t.Errorf("header key %q missing", k)
				}
			}
			if s := r.Header["set"]; s != "" && s != "heldout" {
				t.Errorf("set %q: the only set named is heldout", s)
			}
			mm, err := r.CheckBusBW()
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range mm {
				t.Errorf("printed figures disagree: %v", m)
			}
		})
		if strings.Contains(readHeader(t, tc.file), "# set: heldout") {
			heldOut++
		}
	}
	// About a quarter of the files judge the model without being fitted to.
	if n := len(datasetFiles); heldOut*5 < n || heldOut*3 > n {
		t.Errorf("%d of %d files are held out; keep it near a quarter", heldOut, n)
	}
}

func readHeader(t *testing.T, file string) string {
	b, err := os.ReadFile(filepath.Join(datasetDir, file))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseLayouts(t *testing.T) {
	// Row layouts nccl-tests has printed over the years, and log prefixes.
	tests := []struct {
		name    string
		in      string
		redop   string
		hasRoot bool
		inPlace bool
		check   string
		want    Measurement
	}{
		{"no redop, error column", "       32768          4096   float    13.39    1.22    1.22  0e+00    11.85    1.38    1.38  0e+00",
			"", false, true, "0e+00", Measurement{TimeUS: 13.39, AlgBW: 1.22, BusBW: 1.22}},
		{"redop, error column", "  1073741824     268435456     float     sum   8142.6  131.87  230.77  2e-07   8141.2  131.89  230.81  2e-07",
			"sum", false, true, "2e-07", Measurement{TimeUS: 8142.6, AlgBW: 131.87, BusBW: 230.77}},
		{"redop, root, wrong count", "   134217728      33554432     float     sum      -1   1211.2  110.81  110.81      0   1211.8  110.76  110.76    N/A",
			"sum", true, true, "0", Measurement{TimeUS: 1211.2, AlgBW: 110.81, BusBW: 110.81}},
		{"out-of-place only", "     8388608       2097152     float     sum      -1    80.32  104.44  182.77      0",
			"sum", true, false, "0", Measurement{TimeUS: 80.32, AlgBW: 104.44, BusBW: 182.77}},
		{"Open MPI tag", "[1,0]<stdout>:  8589934592    2147483648     float     sum      -1    31289  274.53  480.43      0    31294  274.49  480.36      0",
			"sum", true, true, "0", Measurement{TimeUS: 31289, AlgBW: 274.53, BusBW: 480.43}},
		{"srun label", "0:   1073741824     268435456     float     sum      -1    26217   40.96   76.79      0    26194   40.99   76.86      0",
			"sum", true, true, "0", Measurement{TimeUS: 26217, AlgBW: 40.96, BusBW: 76.79}},
		{"timestamp then srun label", "2025-03-04T10:11:12.345Z 12:       8192          2048     float    none      -1    17.06    0.48    0.24      0    16.80    0.49    0.24      0",
			"none", true, true, "0", Measurement{TimeUS: 17.06, AlgBW: 0.48, BusBW: 0.24}},
		{"bracketed timestamp, tag", "[2025-03-04 10:11:12] [1,3]<stdout>:           0             0     float    none      -1     0.06    0.00    0.00      0     0.06    0.00    0.00      0",
			"none", true, true, "0", Measurement{TimeUS: 0.06}},
		{"SkyPilot and Open MPI", "(head, rank=0, pid=3808) [1,0]<stdout>:  8589934592     134217728     float    none      -1    24724  347.44  325.72      0    24214  354.75  332.58      0",
			"none", true, true, "0", Measurement{TimeUS: 24724, AlgBW: 347.44, BusBW: 325.72}},
		{"coloured SkyPilot worker prefix", "\x1b[36m(worker1, rank=1, ip=10.146.0.26, pid=13566)\x1b[0m     8388608       2097152     float     sum      -1    80.32  104.44  182.77      0    80.32  104.44  182.77      0",
			"sum", true, true, "0", Measurement{TimeUS: 80.32, AlgBW: 104.44, BusBW: 182.77}},
		{"Ray worker", "(RayTrainWorker pid=2890, ip=10.0.0.1)    1048576    262144  float  sum  -1  58.46  17.94  16.82  0  54.81  19.13  17.93  0",
			"sum", true, true, "0", Measurement{TimeUS: 58.46, AlgBW: 17.94, BusBW: 16.82}},
		{"bfloat16 and tabs", "\t16777216\t4194304\tbfloat16\tnone\t-1\t108.8\t154.20\t77.10\t0\t98.19\t170.86\t85.43\t0",
			"none", true, true, "0", Measurement{TimeUS: 108.8, AlgBW: 154.20, BusBW: 77.10}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse(strings.NewReader("# collective: all_reduce\n" + tc.in + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Points) != 1 {
				t.Fatalf("%d points, want 1", len(r.Points))
			}
			p := r.Points[0]
			if p.Line != 2 || p.Redop != tc.redop || p.HasRoot != tc.hasRoot || (p.InPlace != nil) != tc.inPlace || p.OutOfPlace.Check != tc.check && tc.check != "" {
				t.Errorf("got line %d redop %q root %v in-place %v check %q", p.Line, p.Redop, p.HasRoot, p.InPlace != nil, p.OutOfPlace.Check)
			}
			got := p.OutOfPlace
			if got.TimeUS != tc.want.TimeUS || got.AlgBW != tc.want.AlgBW || got.BusBW != tc.want.BusBW {
				t.Errorf("out-of-place %+v, want %+v", got, tc.want)
			}
			if p.HasRoot && p.Root != -1 {
				t.Errorf("root %d, want -1", p.Root)
			}
		})
	}
}

// fullRun is a complete all_reduce_perf output on two hosts, with the log noise a real
// run carries.
const fullRun = `[1,0]<stdout>:# nccl-tests version 2.19.6 nccl-headers=23007 nccl-library=23007
[1,0]<stdout>:# Collective test starting: all_reduce_perf
[1,0]<stdout>:# nThread 1 nGpus 1 minBytes 536870912 maxBytes 1073741824 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0
[1,0]<stdout>:#
[1,0]<stdout>:# Using devices
[1,0]<stdout>:#  Rank  0 Group  0 Pid 249104 on node1 device  0 [0000:00:05] NVIDIA B200
[1,0]<stdout>:#  Rank  1 Group  0 Pid 249105 on node1 device  1 [0000:00:06] NVIDIA B200
[1,0]<stdout>:#  Rank  2 Group  0 Pid 296420 on node2 device  0 [0000:00:05] NVIDIA B200
[1,0]<stdout>:#  Rank  3 Group  0 Pid 296421 on node2 device  1 [0000:00:06] NVIDIA B200
node1:249104:249104 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
[1,0]<stdout>:NCCL version 2.30.7+cuda13.0
[1,0]<stdout>:#
[1,0]<stdout>:#                                                              out-of-place                       in-place
[1,0]<stdout>:#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
[1,0]<stdout>:#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
[1,0]<stdout>:   536870912     134217728     float     sum      -1   1806.7  297.16  445.74      0   1835.9  292.43  438.65      0
[1,0]<stdout>:  1073741824     268435456     float     sum      -1   3108.8  345.39  518.09      0   2924.7  367.13  550.70      0
[1,0]<stdout>:# Out of bounds values : 0 OK
[1,0]<stdout>:# Avg bus bandwidth    : 488.295
`

func TestParseFullRun(t *testing.T) {
	r, err := Parse(strings.NewReader(fullRun))
	if err != nil {
		t.Fatal(err)
	}
	want := Result{
		Collective: AllReduce, Ranks: 4, Nodes: 2, GPUsPerNode: 2, Hosts: []string{"node1", "node2"},
		NThread: 1, NGpus: 1, MinBytes: 536870912, MaxBytes: 1073741824,
		NCCLVersion: "2.30.7+cuda13.0", TestsVersion: "2.19.6", AvgBusBW: 488.295, HasAvgBusBW: true,
	}
	got := *r
	got.Devices, got.Points = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	if len(r.Devices) != 4 || r.Devices[2].Host != "node2" || r.Devices[2].Name != "NVIDIA B200" || r.Devices[3].Device != 1 || r.Devices[0].Line != 6 {
		t.Errorf("devices %+v", r.Devices)
	}
	if len(r.Points) != 2 || r.Points[1].Line != 17 || r.Points[1].InPlace.TimeUS != 2924.7 {
		t.Errorf("points %+v", r.Points)
	}
	mm, err := r.CheckBusBW()
	if err != nil || len(mm) != 0 {
		t.Errorf("check: %v %v", mm, err)
	}
}

// markdownRun is nccl-tests output as a Markdown page renders it: the leading "#" of
// every comment line is gone.
const markdownRun = `  nccl-tests version 2.17.6 nccl-headers=22602 nccl-library=22602
  Collective test starting: all_reduce_perf
  nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
        size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
         (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    36.50    0.00    0.00       0    36.16    0.00    0.00       0
          16             4     float     sum      -1    35.55    0.00    0.00       0    35.49    0.00    0.00       0
  Out of bounds values : 0 OK
  Avg bus bandwidth    : 0.00123
`

func TestParseWithoutHashes(t *testing.T) {
	r, err := Parse(strings.NewReader(markdownRun))
	if err != nil {
		t.Fatal(err)
	}
	if r.Collective != AllReduce || r.TestsVersion != "2.17.6" || r.NThread != 1 || r.MaxBytes != 16 || !r.HasAvgBusBW || r.AvgBusBW != 0.00123 || len(r.Points) != 2 || r.Points[1].Line != 7 {
		t.Errorf("read %+v", r)
	}
}

func TestParseDeviceListForms(t *testing.T) {
	tests := []struct {
		name              string
		devices           string
		ranks, nodes, per int
		hosts             []string
	}{
		{"older, no Group", "   Rank  0 Pid 1821213 on AI-A100-Beethoven01 device  0 [0x00] NVIDIA A100-SXM4-40GB\n   Rank  1 Pid 1821214 on AI-A100-Beethoven01 device  1 [0x00] NVIDIA A100-SXM4-40GB\n", 2, 1, 2, []string{"AI-A100-Beethoven01"}},
		{"no host", "#  Rank  0 Group  0 Pid 221599 device  0 [0000:8f:00] NVIDIA B200\n#  Rank  1 Group  0 Pid 221599 device  1 [0000:90:00] NVIDIA B200\n", 2, 0, 0, nil},
		{"partial list", "#  Rank 71 Group  0 Pid  14840 on slurm-gb200-207-171 device  3 [0x01] NVIDIA Graphics Device\n", 72, 0, 0, nil},
		{"uneven hosts", "# Rank 0 Pid 1 on a device 0 [0x1] X\n# Rank 1 Pid 2 on a device 1 [0x2] X\n# Rank 2 Pid 3 on b device 0 [0x1] X\n", 3, 2, 0, []string{"a", "b"}},
		{"list printed twice", "# Rank 0 Pid 1 on a device 0 [0x1] X\n# Rank 0 Pid 1 on a device 0 [0x1] X\n# Rank 1 Pid 2 on b device 0 [0x1] X\n", 2, 2, 1, []string{"a", "b"}},
	}
	row := "     8388608       2097152     float     sum      -1    80.32  104.44  182.77      0    80.32  104.44  182.77      0\n"
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse(strings.NewReader(tc.devices + row))
			if err != nil {
				t.Fatal(err)
			}
			if r.Ranks != tc.ranks || r.Nodes != tc.nodes || r.GPUsPerNode != tc.per || !reflect.DeepEqual(r.Hosts, tc.hosts) {
				t.Errorf("ranks %d nodes %d per node %d hosts %v; want %d %d %d %v", r.Ranks, r.Nodes, r.GPUsPerNode, r.Hosts, tc.ranks, tc.nodes, tc.per, tc.hosts)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	row := "     8388608       2097152     float     sum      -1    80.32  104.44  182.77      0    80.32  104.44  182.77      0\n"
	dev := "#  Rank  0 Group  0 Pid 1 on h1 device  0 [0x1] NVIDIA H100\n#  Rank  1 Group  0 Pid 2 on h2 device  0 [0x1] NVIDIA H100\n"
	tests := []struct {
		name string
		in   string
		line int
		msg  string
	}{
		{"empty", "", 0, "no result table row"},
		{"only noise", "hello\nNCCL INFO x\n# comment\n", 0, "no result table row"},
		{"word for a number", "#\n" + row + "    16777216       4194304     float     sum      -1    abc  151.81  265.67      0    110.5  151.81  265.67      0\n", 3, `time "abc"`},
		{"short row", row + "    16777216       4194304     float     sum      -1    110.5  151.81\n", 2, "has 7 fields"},
		{"long row", "    16777216       4194304     float     sum      -1    110.5  151.81  265.67  0  1  110.5  151.81  265.67      0\n", 1, "has 14 fields"},
		{"no type", "    16777216       4194304   110.5  151.81  265.67      0    110.5  151.81  265.67      0\n", 1, "then a data type"},
		{"bad root", "    16777216       4194304     float     sum      x    110.5  151.81  265.67      0    110.5  151.81  265.67      0\n", 1, `root "x"`},
		{"negative bandwidth", "    16777216       4194304     float     sum      -1    110.5  -151.81  265.67      0    110.5  151.81  265.67      0\n", 1, "algbw"},
		{"bad error column", "    16777216       4194304     float     sum      -1    110.5  151.81  265.67      ok    110.5  151.81  265.67      0\n", 1, "error column"},
		{"huge size", "99999999999999999999 1 float sum -1 1 1 1 0 1 1 1 0\n", 1, "size"},
		{"duplicate key", "# ranks: 2\n# ranks: 2\n" + row, 2, `"ranks" given twice`},
		{"ranks contradict list", "# ranks: 8\n" + dev + row, 1, "header says ranks 8 but the device list shows 2"},
		{"nodes contradict list", "# nodes: 1\n" + dev + row, 1, "header says nodes 1"},
		{"ranks not a number", "# ranks: many\n" + row, 1, "not a positive integer"},
		{"nodes times per node", "# ranks: 16\n# nodes: 2\n# gpus_per_node: 4\n" + row, 3, "2 nodes of 4 GPUs do not make 16 ranks"},
		{"unknown collective", "# collective: allmagic\n" + row, 1, `unknown collective "allmagic"`},
		{"collective contradicts run", "# collective: all_gather\n# Collective test starting: all_reduce_perf\n" + row, 1, "header says collective all_gather but line 2 runs all_reduce"},
		{"unknown test program", "# Collective test starting: fancy_perf\n" + row, 1, "unknown collective"},
		{"second run", "# nThread 1 nGpus 1 minBytes 8 maxBytes 8\n" + row + "# nThread 1 nGpus 1 minBytes 8 maxBytes 8\n" + row, 3, "a second run starts here"},
		{"two communicators", "#  Rank  0 Group  0 Pid 1 on h1 device  0 [0x1] X\n#  Rank  0 Group  0 Pid 7 on h2 device  0 [0x1] X\n" + row, 2, "did not form one communicator"},
		{"bad nThread", "# nThread one nGpus 1\n" + row, 1, `nThread "one"`},
		{"bad average", row + "# Avg bus bandwidth    : fast\n", 2, "average bus bandwidth"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.in))
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("error %v, want a *LineError", err)
			}
			if le.Line != tc.line || !strings.Contains(le.Msg, tc.msg) {
				t.Errorf("line %d %q; want line %d containing %q", le.Line, le.Msg, tc.line, tc.msg)
			}
			if tc.line > 0 && !strings.Contains(err.Error(), "line ") {
				t.Errorf("message %q does not name the line", err.Error())
			}
		})
	}
}

func TestCollectiveFromOutput(t *testing.T) {
	row := "   134217728      33554432     float     sum      -1   1211.2  110.81  110.81      0   1211.8  110.76  110.76    N/A\n"
	for in, want := range map[string]Collective{
		"./build/sendrecv_perf -b 128M -e 1G -f 2 -g 8\n":                SendRecv,
		"mpirun -np 16 /opt/nccl-tests/build/alltoall_perf -b 8 -e 1G\n": AllToAll,
		"# Collective test starting: reduce_scatter_perf\n":              ReduceScatter,
		"srun all_gather_perf_mpi -b 8\n":                                AllGather,
		"":                                                               "",
	} {
		r, err := Parse(strings.NewReader(in + row))
		if err != nil {
			t.Fatal(err)
		}
		if r.Collective != want {
			t.Errorf("%q: collective %q, want %q", in, r.Collective, want)
		}
	}
	for in, want := range map[string]Collective{"all_to_all": AllToAll, "AllReduce": AllReduce, "send_recv": SendRecv, "reduce_scatter_perf": ReduceScatter, " all_gather ": AllGather} {
		if c, ok := ParseCollective(in); !ok || c != want {
			t.Errorf("ParseCollective(%q) = %q %v, want %q", in, c, ok, want)
		}
	}
	if _, ok := ParseCollective("all_reduce_v"); ok {
		t.Error("ParseCollective accepted all_reduce_v")
	}
}

func TestBusBWFactor(t *testing.T) {
	tests := []struct {
		c    Collective
		n    int
		want float64
		ok   bool
	}{
		{AllReduce, 8, 1.75, true}, {AllReduce, 2, 1, true}, {AllReduce, 1, 0, true}, {AllReduce, 72, 142.0 / 72, true},
		{AllGather, 8, 0.875, true}, {ReduceScatter, 16, 15.0 / 16, true}, {AllToAll, 2, 0.5, true},
		{SendRecv, 8, 1, true}, {Broadcast, 8, 1, true}, {Reduce, 3, 1, true},
		{Gather, 8, 0, false}, {AllReduce, 0, 0, false}, {Collective("x"), 4, 0, false},
	}
	for _, tc := range tests {
		got, ok := BusBWFactor(tc.c, tc.n)
		if ok != tc.ok || math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("BusBWFactor(%s, %d) = %v %v, want %v %v", tc.c, tc.n, got, ok, tc.want, tc.ok)
		}
	}
	// The all_reduce factor is twice the all_gather one: a ring all_reduce is a
	// reduce_scatter and an all_gather (doc/PERFORMANCE.md).
	for n := 1; n <= 1024; n++ {
		ar, _ := BusBWFactor(AllReduce, n)
		ag, _ := BusBWFactor(AllGather, n)
		rs, _ := BusBWFactor(ReduceScatter, n)
		if math.Abs(ar-ag-rs) > 1e-12 || ag >= 1 || ag < 0 {
			t.Fatalf("n=%d: all_reduce %v, all_gather %v, reduce_scatter %v", n, ar, ag, rs)
		}
	}
}

func TestCheckBusBWFindsTampering(t *testing.T) {
	r, err := Parse(strings.NewReader(fullRun))
	if err != nil {
		t.Fatal(err)
	}
	r.Points[0].OutOfPlace.BusBW = 445.76 // 0.02 off: more than the print's rounding
	r.Points[1].InPlace.AlgBW = 380       // 1073741824 B in 2924.7 us is 367.13 GB/s
	r.Points[1].InPlace.BusBW = 380 * 1.5
	mm, err := r.CheckBusBW()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range mm {
		got = append(got, m.String())
	}
	sort.Strings(got)
	want := []string{
		"line 16 out-of-place busbw: printed 445.76, the other columns give 445.7400",
		"line 17 in-place algbw: printed 380, the other columns give 367.1289",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("mismatches\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	r.Collective = ""
	if _, err := r.CheckBusBW(); !errors.Is(err, ErrUnchecked) {
		t.Errorf("unknown collective: %v, want ErrUnchecked", err)
	}
}
