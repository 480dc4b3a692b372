"""A worker's own threads' database calls and the forks of its pool's processes (durable/runtime/forks.py): a fork
waits for a call under way to end, and the child forked can make such calls itself."""
from __future__ import annotations

import subprocess
import sys

# In a process of its own: the guard, once set, stays for the life of the process.
SCRIPT = """
import os, threading
from durable.runtime.forks import between_forks, guard_forks

guard_forks()
order, inside = [], threading.Event()

def database_call():
    with between_forks():
        inside.set()
        threading.Event().wait(0.3)  # a sweep's queries
        order.append("call ended")

thread = threading.Thread(target=database_call)
thread.start()
inside.wait()
pid = os.fork()
if pid == 0:
    with between_forks():  # the child's own lock is free: it can sweep, or wake, in its turn
        os._exit(7)
order.append("forked")
thread.join()
_, status = os.waitpid(pid, 0)
print(order, os.waitstatus_to_exitcode(status))
"""


def test_a_fork_waits_for_the_threads_database_call_and_the_child_can_make_its_own():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['call ended', 'forked'] 7"
