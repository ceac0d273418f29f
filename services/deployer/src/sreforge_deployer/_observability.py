"""The run's own Prometheus and Alertmanager: launch specs and readiness checks."""

from __future__ import annotations

import time
from pathlib import Path

from sreforge_prom import PrometheusClient, PrometheusError, duration_seconds, scale_duration

from sreforge_deployer._errors import ComponentStartError, DeployerError
from sreforge_deployer._process import LaunchSpec, log_tail
from sreforge_deployer._render import RenderedObservability, render_observability
from sreforge_deployer._settings import DeployerSettings
from sreforge_deployer._wiring import ALERTMANAGER, PROMETHEUS, Wiring

__all__ = [
    "alertmanager_launch",
    "go_runtime_env",
    "observability_launches",
    "prometheus_launch",
    "render_run_observability",
    "settle_past_windows",
    "wait_scraped",
    "wait_scraped_since",
]

# Prometheus's own timers at real scale; scaled with everything else.
_LOOKBACK_DELTA = "5m"
_RESEND_DELAY = "1m"
# One API call's limit while polling; the poll's own deadline is the caller's.
_CALL_TIMEOUT = 2.0


def prometheus_launch(
    binary: str,
    rendered: RenderedObservability,
    port: int,
    obs_dir: Path,
    log_dir: Path,
    *,
    env: dict[str, str],
    time_scale: float,
    timeout_seconds: float,
    host: str = "127.0.0.1",
) -> LaunchSpec:
    """How to start the run's Prometheus on `host`:`port`, data under `obs_dir`."""
    return LaunchSpec(
        name=PROMETHEUS,
        argv=[
            binary,
            f"--config.file={rendered.prometheus_config}",
            f"--storage.tsdb.path={obs_dir / 'data'}",
            "--storage.tsdb.retention.time=1d",
            f"--web.listen-address={host}:{port}",
            f"--query.lookback-delta={scale_duration(_LOOKBACK_DELTA, time_scale)}",
            f"--rules.alert.resend-delay={scale_duration(_RESEND_DELAY, time_scale)}",
        ],
        cwd=obs_dir,
        env=env,
        log_path=log_dir / f"{PROMETHEUS}.log",
        port=port,
        health_url=f"http://127.0.0.1:{port}/-/ready",
        startup_timeout_seconds=timeout_seconds,
    )


def alertmanager_launch(
    binary: str,
    rendered: RenderedObservability,
    port: int,
    obs_dir: Path,
    log_dir: Path,
    *,
    env: dict[str, str],
    timeout_seconds: float,
    host: str = "127.0.0.1",
) -> LaunchSpec:
    """How to start the run's Alertmanager on `host`; clustering off: it binds only `port`."""
    return LaunchSpec(
        name=ALERTMANAGER,
        argv=[
            binary,
            f"--config.file={rendered.alertmanager_config}",
            f"--storage.path={obs_dir / 'data'}",
            f"--web.listen-address={host}:{port}",
            # Empty disables the gossip listener, which otherwise binds 0.0.0.0:9094
            # and makes a second stack on this machine fail.
            "--cluster.listen-address=",
        ],
        cwd=obs_dir,
        env=env,
        log_path=log_dir / f"{ALERTMANAGER}.log",
        port=port,
        health_url=f"http://127.0.0.1:{port}/-/ready",
        startup_timeout_seconds=timeout_seconds,
    )


def observability_launches(
    settings: DeployerSettings, rendered: RenderedObservability, wiring: Wiring, obs_dir: Path
) -> list[LaunchSpec]:
    """Alertmanager then Prometheus for one run, each with its data dir under `obs_dir`."""
    am_dir, prom_dir = obs_dir / ALERTMANAGER, obs_dir / PROMETHEUS
    am_dir.mkdir(exist_ok=True)
    prom_dir.mkdir(exist_ok=True)
    env = {**wiring.base_env(), **go_runtime_env(settings)}
    timeout = settings.observability_timeout_seconds
    return [
        alertmanager_launch(
            settings.alertmanager_bin,
            rendered,
            wiring.ports[ALERTMANAGER],
            am_dir,
            wiring.log_dir,
            env=env,
            timeout_seconds=timeout,
        ),
        prometheus_launch(
            settings.prometheus_bin,
            rendered,
            wiring.ports[PROMETHEUS],
            prom_dir,
            wiring.log_dir,
            env=env,
            time_scale=wiring.time_scale,
            timeout_seconds=timeout,
        ),
    ]


def go_runtime_env(settings: DeployerSettings) -> dict[str, str]:
    """GOGC/GOMEMLIMIT for the Go servers, as configured (unset ones left to Go)."""
    knobs = {"GOGC": settings.observability_gogc, "GOMEMLIMIT": settings.observability_gomemlimit}
    return {name: value for name, value in knobs.items() if value}


def wait_scraped(prometheus_url: str, jobs: set[str], timeout_seconds: float, log: Path) -> None:
    """Block until every job in `jobs` has been scraped successfully at least once."""
    deadline = time.monotonic() + timeout_seconds
    health: dict[str, str] = {}
    with PrometheusClient(prometheus_url, timeout_seconds=_CALL_TIMEOUT) as prometheus:
        while time.monotonic() < deadline:
            health = _target_health(prometheus)
            if jobs <= {job for job, state in health.items() if state == "up"}:
                return
            time.sleep(0.2)
    missing = sorted(f"{job}={health.get(job, 'absent')}" for job in jobs)
    raise ComponentStartError(
        PROMETHEUS,
        f"targets not all scraped up within {timeout_seconds:g}s: {', '.join(missing)}",
        log_path=log,
        log_tail=log_tail(log),
    )


def _target_health(prometheus: PrometheusClient) -> dict[str, str]:
    try:
        targets = prometheus.targets()
    except PrometheusError:
        return {}
    health: dict[str, str] = {}
    for target in targets:
        # A job is up only if all of its targets are.
        if health.get(target.job, "up") == "up":
            health[target.job] = target.health
    return health


def wait_scraped_since(prometheus_url: str, job: str, when: float, timeout_seconds: float) -> None:
    """Block until Prometheus holds a scrape of `job` taken at or after unix time `when`."""
    deadline = time.monotonic() + timeout_seconds
    query = f'timestamp(up{{job="{job}"}})'
    with PrometheusClient(prometheus_url, timeout_seconds=_CALL_TIMEOUT) as prometheus:
        while time.monotonic() < deadline:
            try:
                samples = prometheus.query(query)
                if samples and min(sample.value for sample in samples) >= when:
                    return
            except PrometheusError:
                pass
            time.sleep(0.1)
    raise DeployerError(f"Prometheus has no scrape of job {job!r} after {when:.1f} in time")


def render_run_observability(
    templates: Path, obs: Path, wiring: Wiring, token: str, receiver: str, time_scale: float
) -> RenderedObservability:
    """Render the run's Prometheus and Alertmanager configs into `obs` (created here)."""
    obs.mkdir(parents=True)
    # Always the run's own copy: Alertmanager shows its config (the file's path) to
    # anyone who asks, the agent included, and a shared token file lives in the engine
    # home, whose path names the harness.
    token_file = obs / "webhook.token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    values = wiring.template_values(receiver, token_file)
    return render_observability(templates, obs, values, time_scale)


def settle_past_windows(
    prometheus_url: str, rendered: RenderedObservability, job: str, since: float
) -> None:
    """Wait until every window requests feed (`settle_window`) has moved past `since`
    (plus a scrape) for `job`."""
    if not rendered.settle_window:
        return
    window = duration_seconds(rendered.settle_window)
    scrape = duration_seconds(rendered.scrape_interval)
    wait_scraped_since(prometheus_url, job, since + window + scrape, window + 30.0)
