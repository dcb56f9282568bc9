"""``grpojax launch``: start N local processes of one command as one multi-process JAX program.

The launcher only starts processes: each gets ``GRPOJAX_COORDINATOR_ADDRESS`` (127.0.0.1 and a free port),
``GRPOJAX_NUM_PROCESSES`` and ``GRPOJAX_PROCESS_ID``; JAX's own runtime (``jax.distributed.initialize``) does
the rest. It waits for all of them, stops the others as soon as one fails, and exits with the first failing
status (0 when all succeed).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time

# the variables grpojax._distributed reads, spelt here so that building the parser imports no JAX (`grpojax --help`
# stays fast); tests/test_cli_contract.py checks that they agree
ENV_COORDINATOR = "GRPOJAX_COORDINATOR_ADDRESS"
ENV_NUM_PROCESSES = "GRPOJAX_NUM_PROCESSES"
ENV_PROCESS_ID = "GRPOJAX_PROCESS_ID"
from grpojax._errors import InvalidValueError
from grpojax.cli._common import CLIError, err_console

_GRACE_S = 5.0
_POLL_S = 0.05


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "launch",
        help="run a command as N local processes of one multi-process JAX program",
        description="Start N processes of COMMAND on this machine with the environment of a multi-process JAX "
                    f"run ({ENV_COORDINATOR}=127.0.0.1:PORT, {ENV_NUM_PROCESSES}=N, {ENV_PROCESS_ID}=0..N-1). "
                    "Wait for all; if one fails, stop the others and exit with its status. A COMMAND that "
                    "starts with `grpojax` runs with this Python. On several hosts, set the three variables "
                    "yourself (see the multi-host guide) or, on a TPU pod slice, pass --distributed on.\n\n"
                    "Example:\n  grpojax launch -n 2 -- grpojax sweep --preset transition --size 8 --out out/sweep",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("-n", "--num-processes", type=int, required=True, help="number of processes N >= 1")
    p.add_argument("--port", type=int, default=None, help="coordinator port on 127.0.0.1 (default: a free one)")
    p.add_argument("--devices-per-process", type=int, default=None, metavar="K",
                   help="give process i the accelerators i·K .. i·K+K-1 (sets JAX_LOCAL_DEVICE_IDS; GPUs)")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="stop every process after this long and exit with status 124 (default: no limit)")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ...",
                   help="the command every process runs")
    p.set_defaults(func=run)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _command(argv: list[str]) -> list[str]:
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise CLIError("no command given; expected `grpojax launch -n N -- COMMAND ...`")
    if argv[0] == "grpojax":  # the same interpreter and installation as the launcher
        return [sys.executable, "-c", "import sys; from grpojax.cli import main; sys.exit(main())", *argv[1:]]
    return argv


def _status(code: int) -> int:
    """A child's exit status as a shell reports it (128 + N for a process killed by signal N)."""
    return 128 - code if code < 0 else code


def _stop(procs: list[subprocess.Popen]) -> None:
    """SIGTERM every running process group, then SIGKILL what is left after a grace period."""
    running = [p for p in procs if p.poll() is None]
    for p in running:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + _GRACE_S
    for p in running:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def launch(command: list[str], num_processes: int, *, port: int | None = None,
           devices_per_process: int | None = None, timeout: float | None = None) -> int:
    """Run ``command`` as ``num_processes`` local processes; return the exit status.

    Args:
        command: the program and its arguments (run as is, in the current folder and environment).
        num_processes: N >= 1.
        port: coordinator port on 127.0.0.1 (default: a free one).
        devices_per_process: K accelerators per process (``JAX_LOCAL_DEVICE_IDS``); None leaves them as is.
        timeout: seconds before every process is stopped (status 124); None for no limit.

    Returns:
        0 when every process exits with 0; otherwise the status of the first process that failed (the others
        are stopped), 124 on timeout, 130 on Ctrl-C.

    Raises:
        ValueError: ``num_processes`` < 1, a port outside 1..65535, K < 1 or a timeout <= 0.
    """
    if num_processes < 1:
        raise InvalidValueError(f"num_processes must be >= 1, got {num_processes}")
    if port is not None and not 0 < port < 65536:
        raise InvalidValueError(f"port must be in [1, 65535], got {port}")
    if devices_per_process is not None and devices_per_process < 1:
        raise InvalidValueError(f"devices_per_process must be >= 1, got {devices_per_process}")
    if timeout is not None and not timeout > 0:
        raise InvalidValueError(f"timeout must be > 0 seconds, got {timeout}")
    addr = f"127.0.0.1:{port or free_port()}"
    procs: list[subprocess.Popen] = []
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        for i in range(num_processes):
            env = dict(os.environ, **{ENV_COORDINATOR: addr, ENV_NUM_PROCESSES: str(num_processes),
                                      ENV_PROCESS_ID: str(i)})
            if devices_per_process is not None:
                k = devices_per_process
                env["JAX_LOCAL_DEVICE_IDS"] = ",".join(str(d) for d in range(i * k, (i + 1) * k))
            # its own process group, so that stopping it also stops whatever it started
            procs.append(subprocess.Popen(command, env=env, start_new_session=True))
        while True:
            codes = [p.poll() for p in procs]
            failed = [(i, c) for i, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                i, code = failed[0]
                others = sum(c is None for c in codes)
                _stop(procs)
                err_console.print(f"grpojax launch: process {i} exited with status {_status(code)}"
                                  + (f"; stopped the other {others}" if others else ""), soft_wrap=True)
                return _status(code)
            if all(c == 0 for c in codes):
                return 0
            if deadline is not None and time.monotonic() > deadline:
                _stop(procs)
                err_console.print(f"grpojax launch: stopped all {num_processes} processes after {timeout:g} s",
                                  soft_wrap=True)
                return 124
            time.sleep(_POLL_S)
    except BaseException:
        _stop(procs)
        raise


def run(args) -> int:
    command = _command(list(args.command))
    try:
        return launch(command, args.num_processes, port=args.port, devices_per_process=args.devices_per_process,
                      timeout=args.timeout)
    except InvalidValueError as exc:
        flag = {"num_processes": "--num-processes", "port": "--port", "devices_per_process": "--devices-per-process",
                "timeout": "--timeout"}
        msg = str(exc)
        for name, f in flag.items():
            if msg.startswith(name + " "):
                msg = f + msg[len(name):]
        raise CLIError(msg) from None
