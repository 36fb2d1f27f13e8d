// Package nccltests reads the output of NVIDIA's nccl-tests benchmarks (all_reduce_perf,
// all_gather_perf, reduce_scatter_perf, alltoall_perf, sendrecv_perf and their siblings)
// as the programs print it, and turns every row of the result table into a Point.
//
// What it accepts:
//
//   - The result table in each of the column sets nccl-tests has printed over time:
//     "size count type time algbw busbw error" (no redop), "size count type redop ..."
//     with an error column, and "size count type redop root ... #wrong". Each row has an
//     out-of-place group and, normally, an in-place group (time, algbw, busbw and an
//     error or wrong-count column that may read N/A).
//   - The header lines: "# nThread 1 nGpus 8 minBytes ..." and the device list
//     ("#  Rank  3 Group  0 Pid 1234 on host7 device  3 [0x1b] NVIDIA H100 80GB HBM3",
//     with or without the Group field and the "on host" part). The ranks are counted
//     from that list (the highest rank plus one); the nodes are the distinct hosts when
//     the list is complete.
//   - "# nccl-tests version", "# Collective test starting: all_reduce_perf",
//     "NCCL version 2.26.6+cuda12.8" and "# Avg bus bandwidth" lines.
//   - Provenance lines "# key: value" (lower-case key of letters, digits and
//     underscores). The keys collective, ranks, nodes and gpus_per_node supply what
//     the output itself does not show, and must agree with it when it does.
//   - Log prefixes in front of any line: Open MPI's "[1,0]<stdout>:", srun's "0: ",
//     SkyPilot's and Ray's "(head, rank=0, pid=3808) ", and ISO timestamps, alone or
//     stacked; terminal colour codes are dropped first.
//   - Output pasted into Markdown pages that dropped the leading "#" of the comment
//     lines (the run header, the device list, "Avg bus bandwidth").
//
// ParseAll reads a log of several runs (one program after another) into one Result
// each; Parse takes one run and names the line where a second would start.
//
// Every other line (NCCL INFO logs, launcher messages, blank lines, comments) is
// skipped. A line whose first two fields are integers is a table row and must read
// as one; if it does not, Parse fails with a *LineError naming the line. A file with
// no table row, header keys that contradict the output, or a second run after the
// first one's rows are errors too.
//
// Units are those nccl-tests prints: sizes in bytes, times in microseconds,
// bandwidths in GB/s (1e9 bytes a second). The size column is what nccl-tests calls
// the operation's size: for all_reduce the buffer, for all_gather the gathered
// output, for reduce_scatter the input, for alltoall one rank's whole send buffer,
// for sendrecv what each rank sends.
//
// BusBWFactor gives the bus-bandwidth factor nccl-tests applies per collective
// (doc/PERFORMANCE.md in NVIDIA/nccl-tests), and Result.CheckBusBW verifies the
// printed busbw against algbw times that factor within the print's rounding.
package nccltests
