"""What the python-nomad suites share: a client on NOMAD_ADDR, checks that count, and
polling with a deadline (never a fixed sleep)."""

import os
import sys
import time

import nomad

DEADLINE = float(os.environ.get("DEADLINE_SECONDS", "60"))
_counts = {"passed": 0, "failed": 0}


def client(token=None):
    return nomad.Nomad(address=os.environ["NOMAD_ADDR"], token=token, timeout=15)


def check(name, cond, detail=""):
    if cond:
        _counts["passed"] += 1
        print(f"ok: {name}")
    else:
        _counts["failed"] += 1
        print(f"FAILED: {name}: {detail}")


def raises(name, exc_type, fn):
    """Checks that fn() raises exc_type; answers the exception."""
    try:
        got = fn()
    except exc_type as e:
        check(name, True)
        return e
    except Exception as e:  # noqa: BLE001 - any other failure is the finding
        check(name, False, f"raised {type(e).__name__}: {e}")
        return None
    check(name, False, f"answered {got!r}")
    return None


def eventually(what, fn, deadline=DEADLINE):
    """Polls fn until it answers something truthy; fails the suite past the deadline."""
    until = time.monotonic() + deadline
    last = None
    while time.monotonic() < until:
        try:
            last = fn()
        except nomad.api.exceptions.BaseNomadException as e:
            last = e
        if last and not isinstance(last, Exception):
            return last
        time.sleep(0.2)
    print(f"FAILED: timed out waiting for {what}; last: {last!r}")
    finish(extra_failure=True)


def finish(extra_failure=False):
    failed = _counts["failed"] + (1 if extra_failure else 0)
    print(f"{_counts['passed']} passed, {failed} failed")
    sys.exit(1 if failed else 0)
