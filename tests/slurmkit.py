"""Test kit for SLURM: a real, private, single-node cluster (munged, slurmctld, slurmd) started
from the Debian packages (`slurmctld slurmd slurm-client munge`), as root, without systemd.

Everything lives under one private directory: its own munge key and socket, state, spool, logs
and a `slurm.conf` written from this machine (`slurmd -C` gives CPUs, sockets, cores, threads and
memory) with two free TCP ports. No environment variable of the test process is changed:
`SlurmCluster.env` is the environment to hand to the SLURM client commands (`SLURM_CONF` points at
the private `slurm.conf`), `SlurmCluster.bin` their absolute paths. A system-wide SLURM, if any,
is never touched, and teardown stops only the processes this kit started, by pid.

What the cluster is (measured on Debian 12, SLURM 22.05.8, munge 0.5.15):
- accounting is off (`AccountingStorageType=accounting_storage/none`), so `sacct` answers
  "Slurm accounting storage is disabled"; `JobCompType=jobcomp/filetxt` writes every finished job
  to `jobcomp.txt`, which `sacct -c` reads (final state, exit code, times, work dir);
- `squeue`/`scontrol` keep finished jobs for `MinJobAge` (600 s here);
- one partition `debug` (`DefaultTime=10` minutes, `MaxTime=30`), CPUs oversubscribable 8 times
  (`OverSubscribe=FORCE:8`, `CR_CPU_Memory`, 64 MB per job by default) so a test's jobs run
  side by side on a 2-CPU machine;
- the smallest time limit is one minute (`--time=1`; `--time=0:30` is rounded up to it, `--time=0`
  means UNLIMITED, which `MaxTime` leaves PENDING with reason `PartitionTimeLimit`). slurmctld
  checks limits every 30 s (a fixed period of the controller, not a setting), so with
  `OverTimeLimit=0` a one-minute job ends TIMEOUT 60 to 90 s after it started; `KillWait=2`.
  (`scontrol update JobId=J TimeLimit=0` on a running job ends it TIMEOUT at the next 30 s tick.)
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "sacct", "sinfo")
SBIN_DIRS = ("/usr/sbin", "/sbin", "/usr/local/sbin")
TAG = "RLAGENT_SLURMKIT"  # set in every daemon's environment; slurmstepd and the jobs inherit it
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
PARTITION = "debug"
NODE = "localhost"
DEFAULT_TIME_MIN = 10
MAX_TIME_MIN = 30
MIN_JOB_AGE_S = 600


class ClusterError(RuntimeError):
    """The cluster did not start (the message has the daemons' log tails)."""


def find_binary(name: str) -> str | None:
    """`name` on PATH, else in the sbin directories (root's PATH may lack them)."""
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join(SBIN_DIRS))


def unavailable_reason() -> str | None:
    """One line saying why a private cluster cannot run here, or None when it can."""
    missing = [name for name in (*DAEMONS, *CLIENTS) if find_binary(name) is None]
    if missing:
        return f"SLURM/munge not installed (missing {', '.join(missing)}): apt-get install slurmctld slurmd slurm-client munge"
    if os.geteuid() != 0:
        return "a private SLURM cluster needs root (slurmd runs jobs as their user)"
    return None


def free_ports(count: int) -> list[int]:
    """Ports free on 127.0.0.1 right now (held open together, so they differ)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def machine_node(slurmd: str) -> dict[str, int]:
    """CPUs, Boards, SocketsPerBoard, CoresPerSocket, ThreadsPerCore, RealMemory from `slurmd -C`."""
    out = subprocess.run([slurmd, "-C"], capture_output=True, text=True, timeout=15, check=False).stdout
    found = {key: int(value) for key, value in re.findall(r"\b(\w+)=(\d+)\b", out.splitlines()[0] if out else "")}
    keys = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory")
    if not all(key in found for key in keys):
        cpus = os.cpu_count() or 1
        return {"CPUs": cpus, "RealMemory": max(256, psutil.virtual_memory().total // 2**20)}
    return {key: found[key] for key in keys}


def tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"  ({path.name}: no log)"
    return "\n".join(f"  {path.name}: {line}" for line in text[-lines:])


@dataclass
class SlurmCluster:
    """A running private cluster. Pass `env` to every SLURM client subprocess."""

    root: Path
    conf: Path
    env: dict[str, str]
    bin: dict[str, str]
    jobcomp: Path
    ports: tuple[int, int]
    node: dict[str, int]
    partition: str = PARTITION
    startup_s: float = 0.0
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    # ---- client helpers (the tests' oracle: plain SLURM commands, not rlagent's reader) ----

    def run(self, name: str, *args: str, timeout: float = 20.0, check: bool = True, cwd: Path | None = None):
        done = subprocess.run(
            [self.bin[name], *args], env=self.env, capture_output=True, text=True, timeout=timeout, check=False, cwd=cwd
        )
        if check and done.returncode != 0:
            raise AssertionError(f"{name} {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
        return done

    def sbatch(self, *args: str, cwd: Path | None = None) -> str:
        """Submit; returns the job id (`--parsable`)."""
        out = self.run("sbatch", "--parsable", *args, cwd=cwd).stdout.strip()
        return out.split(";")[0]

    def scontrol_field(self, job_id: str, key: str) -> str | None:
        done = self.run("scontrol", "-o", "show", "job", job_id, check=False)
        match = re.search(rf"(?:^|\s){re.escape(key)}=(\S*)", done.stdout)
        return match.group(1) if match else None

    def wait_state(self, job_id: str, states: Sequence[str], timeout: float = 30.0) -> str:
        """Poll scontrol until the job is in one of `states`; AssertionError with the log tail if not."""
        deadline = time.monotonic() + timeout
        state = None
        while time.monotonic() < deadline:
            state = self.scontrol_field(job_id, "JobState")
            if state in states:
                return state
            time.sleep(0.2)
        raise AssertionError(f"job {job_id} still {state} after {timeout} s (wanted {states})\n{self.log_tails()}")

    def log_tails(self, lines: int = 15) -> str:
        logs = sorted((self.root / "log").glob("*"))
        return "\n".join(tail(path, lines) for path in logs)

    # ---- teardown ----

    def stop(self) -> None:
        """Cancel every job of this cluster, then stop slurmd, slurmctld and munged by pid, then any
        leftover process carrying this cluster's tag (slurmstepd, job scripts)."""
        if self.procs.get("slurmctld") and self.procs["slurmctld"].poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired, OSError):
                self.run("scancel", f"--partition={self.partition}", check=False, timeout=10)
                deadline = time.monotonic() + STOP_TIMEOUT
                while time.monotonic() < deadline:
                    active = self.run("squeue", "-h", "-o", "%i", "-t", "PD,R,CG,S,CF", check=False, timeout=10).stdout
                    if not active.strip():
                        break
                    time.sleep(0.2)
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(STOP_TIMEOUT)
        for proc in tagged_processes(self.env[TAG]):
            with contextlib.suppress(psutil.Error):
                proc.kill()


def tagged_processes(tag: str) -> list[psutil.Process]:
    """Processes whose environment carries this cluster's tag (only readable as root: fine here)."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        with contextlib.suppress(psutil.Error):
            if proc.environ().get(TAG) == tag and proc.pid != os.getpid():
                found.append(proc)
    return found


def write_conf(root: Path, ports: tuple[int, int], node: dict[str, int]) -> Path:
    hardware = " ".join(f"{key}={value}" for key, value in node.items() if key != "RealMemory")
    memory = max(256, int(node["RealMemory"] * 0.9))  # below what slurmd reports, or the node is drained
    partition = (
        f"PartitionName={PARTITION} Nodes={NODE} Default=YES State=UP"
        f" DefaultTime={DEFAULT_TIME_MIN} MaxTime={MAX_TIME_MIN} OverSubscribe=FORCE:8"
    )
    conf = root / "slurm.conf"
    conf.write_text(
        f"""# private single-node test cluster written by tests/slurmkit.py
ClusterName=rlagenttest
SlurmctldHost={NODE}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/run/munge.sock
SlurmctldPort={ports[0]}
SlurmdPort={ports[1]}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={root}/log/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
DefMemPerNode=64
SchedulerType=sched/backfill
SchedulerParameters=sched_min_interval=100000,bf_interval=1
ReturnToService=2
OverTimeLimit=0
KillWait=2
MinJobAge={MIN_JOB_AGE_S}
NodeName={NODE} NodeAddr=127.0.0.1 {hardware} RealMemory={memory} State=UNKNOWN
{partition}
"""
    )
    return conf


def _wait(predicate, timeout: float, what: str, cluster: SlurmCluster) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, proc in cluster.procs.items():
            if proc.poll() is not None:
                raise ClusterError(f"{name} exited with {proc.returncode} while waiting for {what}\n{cluster.log_tails()}")
        if predicate():
            return
        time.sleep(0.1)
    raise ClusterError(f"timed out after {timeout:.0f} s waiting for {what}\n{cluster.log_tails()}")


def make_root() -> Path:
    """A fresh private directory in the system temp dir. Not under pytest's tmp_path: munged refuses
    a socket whose parent directories are not executable by everyone (/tmp/pytest-of-root is 0700)."""
    root = Path(tempfile.mkdtemp(prefix="rlslurm-"))
    root.chmod(0o755)
    return root


def start_cluster(root: Path, timeout: float = START_TIMEOUT) -> SlurmCluster:
    """Start munged, slurmctld and slurmd under `root` (see make_root) and wait, bounded, until the
    node is idle. On failure every daemon started so far is stopped and ClusterError carries the
    log tails."""
    started = time.monotonic()
    for sub in ("munge", "run", "state", "spool", "log"):
        (root / sub).mkdir(mode=0o755, exist_ok=True)
    (root / "munge").chmod(0o700)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)

    binaries = {name: find_binary(name) for name in (*DAEMONS, *CLIENTS)}
    missing = [name for name, path in binaries.items() if path is None]
    if missing:
        raise ClusterError(f"missing {missing}")
    bins: dict[str, str] = {name: path for name, path in binaries.items() if path}
    ports = free_ports(2)
    node = machine_node(bins["slurmd"])
    conf = write_conf(root, (ports[0], ports[1]), node)

    env = {key: value for key, value in os.environ.items() if not key.startswith(("SLURM_", "SBATCH_", "SQUEUE_", "SACCT_"))}
    env.update({"SLURM_CONF": str(conf), TAG: str(root), "TZ": "UTC"})  # scontrol prints UTC, as rlagent's reader asks
    cluster = SlurmCluster(
        root=root, conf=conf, env=env, bin=bins, jobcomp=root / "log" / "jobcomp.txt", ports=(ports[0], ports[1]), node=node
    )
    log = root / "log"
    commands = {
        "munged": [
            bins["munged"], "-F", f"--key-file={key}", f"--socket={root}/run/munge.sock", f"--pid-file={root}/run/munged.pid",
            f"--log-file={log}/munged.log", f"--seed-file={root}/munge/munged.seed",
        ],
        "slurmctld": [bins["slurmctld"], "-D", "-f", str(conf)],
        "slurmd": [bins["slurmd"], "-D", "-f", str(conf), "-N", NODE],
    }  # fmt: skip
    try:
        for name in DAEMONS:
            with open(log / f"{name}.out", "wb") as out:
                cluster.procs[name] = subprocess.Popen(
                    commands[name], env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=root
                )
            if name == "munged":
                _wait(lambda: (root / "run" / "munge.sock").exists(), timeout, "munged's socket", cluster)

        def node_idle() -> bool:
            try:
                done = subprocess.run(
                    [bins["sinfo"], "-h", "-n", NODE, "-o", "%T"], env=env, capture_output=True, text=True, timeout=5, check=False
                )
            except subprocess.TimeoutExpired:
                return False
            return done.stdout.strip() == "idle"

        _wait(node_idle, max(1.0, timeout - (time.monotonic() - started)), "the node to be idle", cluster)
    except BaseException:
        cluster.stop()
        raise
    cluster.startup_s = time.monotonic() - started
    return cluster


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """A private single-node SLURM cluster for the whole session; skipped when SLURM is missing.
    Its directory is removed after the daemons stopped."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    root = make_root()
    try:
        cluster = start_cluster(root)
        try:
            yield cluster
        finally:
            cluster.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
