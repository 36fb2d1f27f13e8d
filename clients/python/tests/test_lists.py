import unittest

from shardplan import expand_pair_runs, expand_transfer_runs, step_pairs, step_transfers


class ListsTest(unittest.TestCase):
    def test_pair_runs(self):
        runs = [{"from": 4, "to": 0, "from_step": 1, "to_step": 1, "count": 3},
                {"from": 0, "to": 7, "from_step": 0, "to_step": 0, "count": 1}]
        self.assertEqual(expand_pair_runs(runs), [[4, 0], [5, 1], [6, 2], [0, 7]])
        self.assertEqual(step_pairs({"pairs": [[1, 2]]}), [[1, 2]])
        self.assertEqual(step_pairs({"pair_runs": runs})[-1], [0, 7])

    def test_transfer_runs(self):
        first = {"from": 1, "to": 0, "ranges": [[0, 4], [8, 16]], "source_local": [[0, 4], [0, 8]],
                 "target_local": [[0, 4], [0, 8]], "bytes": 128}
        step = {"from": 1, "to": 0, "ranges": [[4, 4], [0, 0]], "source_local": [[0, 0], [0, 0]],
                "target_local": [[4, 4], [0, 0]], "bytes": 0}
        got = expand_transfer_runs([{"first": first, "step": step, "count": 3}])
        self.assertEqual(len(got), 3)
        self.assertEqual(got[2]["from"], 3)
        self.assertEqual(got[2]["ranges"], [[8, 12], [8, 16]])
        self.assertEqual(got[2]["target_local"], [[8, 12], [0, 8]])
        self.assertEqual(got[1]["bytes"], 128)
        self.assertEqual(step_transfers({"transfers": [first]}), [first])


if __name__ == "__main__":
    unittest.main()
