"""Running grpojax in child processes from tests: a clean environment and a bounded wait."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from grpojax._distributed import ENV_COORDINATOR, ENV_NUM_PROCESSES, ENV_PROCESS_ID

REPO = pathlib.Path(__file__).resolve().parents[1]
GRPOJAX = [sys.executable, "-c", "import sys; from grpojax.cli import main; sys.exit(main())"]
ENV_NAMES = (ENV_COORDINATOR, ENV_NUM_PROCESSES, ENV_PROCESS_ID)


def clean_env(**extra) -> dict[str, str]:
    """This environment without the multi-process variables and XLA_FLAGS, on CPU, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in ENV_NAMES and k != "XLA_FLAGS"}
    return dict(env, JAX_PLATFORMS="cpu", **extra)


def run_bounded(cmd, timeout: float, **kw) -> subprocess.CompletedProcess:
    """Run a command bounded by ``timeout``; on expiry kill it (and its process group) and fail."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, **kw)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, _ = proc.communicate()
        pytest.fail(f"{cmd[:4]}... ran past {timeout} s:\n{out[-3000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, None)
