"""How ``Pool`` starts its workers: forked from this process when no other thread could hold
a lock across the fork (milliseconds, nothing imported again), from the fork server otherwise;
the results are the same either way."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import json, os, sys, threading, time
    from trnsim.sweep.backends import Pool, forkable

    def who(x):
        import threadpoolctl
        blas = [i["num_threads"] for i in threadpoolctl.threadpool_info()]
        return (os.getppid(), x * x, blas)

    def main():
        mode = sys.argv[1]
        stop = threading.Event()
        if mode == "foreign-thread":
            threading.Thread(target=stop.wait, daemon=True).start()
        elif mode == "progress":
            from trnsim.report.progress import _Plain
            bar = _Plain("work", 4, 0.0, 0.01)  # prints every 10 ms while the pool forks
        if mode == "bar":
            from trnsim.report.progress import progress
            with progress("work", total=6) as b:
                ok = forkable()
                got = sorted(Pool(2).run(who, [(i, i) for i in range(6)]))
                b.advance(6)
        else:
            ok = forkable()
            got = sorted(Pool(2).run(who, [(i, i) for i in range(6)]))
        if mode == "progress":
            bar.close()
        stop.set()
        print(json.dumps({"forkable": ok, "pid": os.getpid(),
                          "ppids": sorted({r[0] for _, r in got}),
                          "values": [r[1] for _, r in got], "blas": got[0][1][2],
                          "cores": len(os.sched_getaffinity(0))}))

    if __name__ == "__main__":
        main()
    """
)


def _run(tmp_path, mode: str, progress: str = "plain") -> dict:
    import json

    p = tmp_path / "pool_start.py"
    p.write_text(SCRIPT)
    env = {"PATH": "/usr/bin:/bin", "TRNSIM_PROGRESS": progress}
    proc = subprocess.run(
        [sys.executable, str(p), mode], capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_single_threaded_process_forks_its_workers_with_narrow_blas(tmp_path):
    doc = _run(tmp_path, "alone")
    assert doc["forkable"] is True
    assert doc["ppids"] == [doc["pid"]]  # the workers are this process's children
    assert doc["values"] == [i * i for i in range(6)]
    assert all(n == max(1, doc["cores"] // 2) for n in doc["blas"])  # cores / 2 workers


def test_our_progress_printer_does_not_stop_the_fork(tmp_path):
    doc = _run(tmp_path, "progress")
    assert doc["forkable"] is True and doc["ppids"] == [doc["pid"]]
    assert doc["values"] == [i * i for i in range(6)]


def test_the_progress_bar_does_not_stop_the_fork(tmp_path):
    doc = _run(tmp_path, "bar", progress="1")  # the rich bar, even on a pipe
    assert doc["forkable"] is True and doc["ppids"] == [doc["pid"]]
    assert doc["values"] == [i * i for i in range(6)]


def test_a_foreign_thread_sends_the_pool_to_the_fork_server(tmp_path):
    doc = _run(tmp_path, "foreign-thread")
    assert doc["forkable"] is False
    assert doc["pid"] not in doc["ppids"]  # forked by the fork server, not by this process
    assert doc["values"] == [i * i for i in range(6)]
