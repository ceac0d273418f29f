"""The host's CPU as the oracle reads it: the machine's pressure and the service's CPU cgroup.

The only I/O of `harness_unstarved` besides the load generator's `/metrics` and
Prometheus: `/proc/pressure/cpu` (PSI) and the run's CPU cgroups, which the deployer
makes as `sreforge-<run id>-<component>` under its own CPU cgroup (cgroup v1's `cpu`
controller, or v2's; see the deployer's `_cpu.py`). The oracle runs on the stack's host (a worker
host grades the runs it deploys), beside the deployer. Anything missing reads as `None`:
no PSI in the kernel, no CPU cgroup (compose, or a host without a writable `cpu`
controller), a cgroup gone with its run.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

__all__ = ["HostReader", "HostReading", "cpu_cgroup_root"]

_PREFIX = "sreforge-"
_NS = 1e9


@dataclass(frozen=True)
class HostReading:
    """One reading; the service's figures are cumulative seconds over its CPU cgroups."""

    cpu_pressure_percent: float | None = None
    service_cpu_seconds: float | None = None
    service_cpu_wait_seconds: float | None = None
    service_throttled_seconds: float | None = None
    service_cpu_limit_cores: float | None = None


def cpu_cgroup_root(proc: Path = Path("/proc/self")) -> Path | None:
    """This process's cgroup in the `cpu` hierarchy (v1, else v2: where the deployer makes
    the run's CPU cgroups), or `None` when none is mounted."""
    own: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in (proc / "cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                own[controller] = path
    with contextlib.suppress(OSError):
        for line in (proc / "mounts").read_text().splitlines():
            _, mount_point, kind, options, *_ = line.split()
            if kind == "cgroup" and "cpu" in options.split(",") and "cpu" in own:
                return _below(Path(mount_point), own["cpu"])
            if kind == "cgroup2" and "" in own and "cpu" not in own:
                return _below(Path(mount_point), own[""])
    return None


def _below(mount_point: Path, path: str) -> Path:
    # A cgroup namespace shows the own cgroup as "/"; the mount then starts there too.
    nested = mount_point / path.lstrip("/")
    return nested if nested.is_dir() else mount_point


class HostReader:
    """Reads the machine's CPU pressure and run `run_id`'s CPU cgroups, once per sample.

    A thread's run and wait times (`/proc/<tid>/schedstat`, fields 1 and 2) are added up
    from their rises between readings, so a thread that ends takes nothing back.
    """

    def __init__(
        self,
        run_id: str,
        *,
        cgroup_root: Path | None = None,
        pressure: Path = Path("/proc/pressure/cpu"),
        proc: Path = Path("/proc"),
    ) -> None:
        self._run_id = run_id
        self._root = cgroup_root if cgroup_root is not None else cpu_cgroup_root()
        self._pressure = pressure
        self._proc = proc
        self._seen: dict[int, tuple[int, int]] = {}
        self._run_ns = 0
        self._wait_ns = 0

    def read(self) -> HostReading:
        """The machine's PSI `some avg10` and the service's cumulative CPU figures."""
        pressure = self._cpu_pressure()
        groups = self._groups()
        if not groups:
            return HostReading(cpu_pressure_percent=pressure)
        throttled_ns, limit = 0, 0.0
        tids: set[int] = set()
        for group in groups:
            tids |= _tids(group)
            stat = _keyed(group / "cpu.stat")
            throttled_ns += stat.get("throttled_time", stat.get("throttled_usec", 0) * 1000)
            limit += _cores(group)
        self._account(tids)
        return HostReading(
            cpu_pressure_percent=pressure,
            service_cpu_seconds=self._run_ns / _NS,
            service_cpu_wait_seconds=self._wait_ns / _NS,
            service_throttled_seconds=throttled_ns / _NS,
            service_cpu_limit_cores=limit or None,
        )

    def _cpu_pressure(self) -> float | None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            for line in self._pressure.read_text().splitlines():
                if line.startswith("some "):
                    fields = dict(field.split("=", 1) for field in line.split()[1:])
                    return float(fields["avg10"])
        return None

    def _groups(self) -> list[Path]:
        if self._root is None:
            return []
        with contextlib.suppress(OSError):
            return sorted(self._root.glob(f"{_PREFIX}{self._run_id}-*"))
        return []

    def _account(self, tids: set[int]) -> None:
        seen: dict[int, tuple[int, int]] = {}
        for tid in tids:
            times = _schedstat(self._proc / str(tid) / "schedstat")
            if times is None:
                continue
            run, wait = times
            before = self._seen.get(tid)
            if before is not None:
                self._run_ns += max(0, run - before[0])
                self._wait_ns += max(0, wait - before[1])
            seen[tid] = times
        self._seen = seen


def _tids(group: Path) -> set[int]:
    for listing in ("tasks", "cgroup.threads"):  # v1, v2
        with contextlib.suppress(OSError, ValueError):
            return {int(line) for line in (group / listing).read_text().split()}
    return set()


def _schedstat(path: Path) -> tuple[int, int] | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        fields = path.read_text().split()
        return int(fields[0]), int(fields[1])
    return None


def _keyed(path: Path) -> dict[str, int]:
    with contextlib.suppress(OSError, ValueError):
        return {
            key: int(value)
            for key, value in (line.split() for line in path.read_text().splitlines())
        }
    return {}


def _cores(group: Path) -> float:
    with contextlib.suppress(OSError, ValueError):
        if (group / "cpu.max").is_file():  # v2: "<quota|max> <period>"
            quota_text, period_text = (group / "cpu.max").read_text().split()
            quota = -1 if quota_text == "max" else int(quota_text)
            period = int(period_text)
        else:
            quota = int((group / "cpu.cfs_quota_us").read_text())
            period = int((group / "cpu.cfs_period_us").read_text())
        if quota > 0 and period > 0:
            return quota / period
    return 0.0
