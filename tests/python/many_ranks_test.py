#!/usr/bin/python3
"""A job of more ranks than a worker's --max-streams (issue 37): 96 tandem.Feed ranks
(world 96) in 4 processes against 2 real `tandem worker` processes with the default
--max-streams 64. Every rank takes its first batch, and only then may any rank go on:
a rank whose stream a worker refused would wait for a stream that frees only when
another rank's run ends, which here never comes, and the test fails at its deadline.

    /usr/bin/python3 tests/python/many_ranks_test.py --module-dir build/python --tandem build/tandem

Exits 77 (skipped) only when numpy is missing."""
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

from workers import Workers, free_ports, parse_args, require

ARGS = parse_args()
require("numpy")

RANKS, PROCESSES = 96, 4
DEADLINE_S = 90  # for every rank's first batch; they come within seconds

# One process: RANKS / PROCESSES ranks, one thread each. A rank marks its first batch in
# DIR, waits until every rank of the job has marked (or the deadline), then ends its run.
RANK_PROCESS = textwrap.dedent("""
    import json, os, sys, threading, time
    import tandem
    given = sys.argv[1]
    if given.endswith(".json"):  # a file: tandem launch would split an argument "[a,b]" (CLI11)
        given = open(given).read()
    workers, first, count, world, folder, deadline = json.loads(given)
    if first < 0:  # one process of `tandem launch`: its slice by its launcher's RANK
        first = int(os.environ["RANK"]) * count
    results = {}
    def rank(r):
        start = time.monotonic()
        with tandem.Feed(workers, rank=r, world=world, data="synthetic", image_size=8, dataset_size=4096,
                         batch_size=2, steps=3, connect_timeout=60, batch_timeout=deadline) as feed:
            batches = iter(feed)
            next(batches)
            results[r] = time.monotonic() - start
            open(os.path.join(folder, str(r)), "w").close()
            while len(os.listdir(folder)) < world and time.monotonic() - start < deadline:
                time.sleep(0.05)
            for _ in batches:
                pass
    threads = [threading.Thread(target=rank, args=(r,)) for r in range(first, first + count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps(results))
""")


class ManyRanksTest(unittest.TestCase):
    def test_through_a_relay_each_worker_serves_one_stream(self):
        # The same 96 ranks in 4 processes of one `tandem launch` host (--share-streams on):
        # every rank is fed from the start, and each worker serves one stream, the relay's.
        with tempfile.TemporaryDirectory() as folder:
            workers = Workers(ARGS.tandem, 2, data="synthetic", image_size=8, dataset_size=4096)
            try:
                env = {**os.environ, "PYTHONPATH": ARGS.module_dir}
                for k in ("RANK", "WORLD_SIZE", "TANDEM_WORKERS", "TANDEM_SETTINGS", "TANDEM_SAGEMAKER_ROOT"):
                    env.pop(k, None)
                master = free_ports(1)[0]
                os.makedirs(folder + "/marks")
                with open(folder + "/args.json", "w") as f:
                    json.dump([workers.targets, -1, RANKS // PROCESSES, RANKS, folder + "/marks", DEADLINE_S], f)
                launch = subprocess.run(
                    [ARGS.tandem, "launch", "--workers", ",".join(workers.targets), "--procs-per-host", str(PROCESSES),
                     "--share-streams", "on", "--master-port", str(master), "--sagemaker-root", folder + "/root",
                     "--", sys.executable, "-c", RANK_PROCESS, folder + "/args.json"],
                    env=env, capture_output=True, text=True, timeout=DEADLINE_S + 120, cwd=folder)
                out = launch.stdout + launch.stderr
                self.assertEqual(launch.returncode, 0, out[-4000:])
                self.assertEqual(len(os.listdir(folder + "/marks")), RANKS, out[-4000:])
                self.assertIn("at most 2 streams to data workers at once", out, out[-4000:])
                for port in workers.ports:
                    self.assertNotIn("already serves", workers.log(port))
            finally:
                workers.close()

    def test_every_rank_is_fed_from_the_start(self):
        with tempfile.TemporaryDirectory() as folder:
            workers = Workers(ARGS.tandem, 2, data="synthetic", image_size=8, dataset_size=4096)
            try:
                per = RANKS // PROCESSES
                env = {**os.environ, "PYTHONPATH": ARGS.module_dir}
                for k in ("RANK", "WORLD_SIZE", "TANDEM_WORKERS", "TANDEM_SETTINGS"):
                    env.pop(k, None)
                procs = [subprocess.Popen([sys.executable, "-c", RANK_PROCESS,
                                           json.dumps([workers.targets, p * per, per, RANKS, folder, DEADLINE_S])],
                                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                         for p in range(PROCESSES)]
                firsts = {}
                for p in procs:
                    out, err = p.communicate(timeout=DEADLINE_S + 120)
                    self.assertEqual(p.returncode, 0, err[-3000:])
                    firsts.update({int(r): s for r, s in json.loads(out.strip().splitlines()[-1]).items()})
                # Each worker served all 96 ranks' streams: none was refused (RESOURCE_EXHAUSTED).
                for port in workers.ports:
                    self.assertNotIn("already serves", workers.log(port))
            finally:
                workers.close()
            self.assertEqual(sorted(firsts), list(range(RANKS)), "every rank took its first batch")
            slowest = max(firsts.values())
            print(f"{RANKS} ranks against 2 workers (--max-streams 64): every first batch within {slowest:.1f} s "
                  f"of its feed's start")
            # Every rank was fed while all the others still held their streams: none waited
            # for another's run to end (that would have taken the whole deadline).
            self.assertLess(slowest, DEADLINE_S / 2)


if __name__ == "__main__":
    sys.argv = sys.argv[:1]
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
