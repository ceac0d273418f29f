"""The oracle service's settings (env prefix `SREFORGE_ORACLE_`)."""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from sreforge_contracts import default_use_cases

from sreforge_oracle._model import StarvationBounds

__all__ = ["OracleSettings"]


class OracleSettings(BaseSettings):
    """Where scenarios live, how the run's Prometheus is read, how often samples are saved."""

    model_config = SettingsConfigDict(
        env_prefix="SREFORGE_ORACLE_", frozen=True, populate_by_name=True
    )

    use_cases_dir: Path = Field(
        default_factory=default_use_cases,
        validation_alias=AliasChoices("SREFORGE_ORACLE_USE_CASES_DIR", "SREFORGE_USE_CASES"),
    )
    """The `use-cases/` root holding `<use_case>/scenarios/<id>/scenario.toml`."""
    prometheus_endpoint: str = "prometheus"
    """The key of the run's Prometheus in the stack's `operator_endpoints`."""
    alertmanager_endpoint: str = "alertmanager"
    """The key of the run's Alertmanager there (read by `monitoring_intact`)."""
    loadgen_endpoint: str = "loadgen"
    """The key of the load generator there: its `/metrics` is scraped once per sample
    (rates, ok ratio, client latency); without it the rates come from Prometheus."""
    load_target_promql: str = "sum(loadgen_target_rps)"
    load_achieved_promql: str = "sum(loadgen_achieved_rps)"
    service_ok_promql: str = "min(loadgen_ok_ratio)"
    """The load generator's share of ok answers, read when the scenario declares
    `service_min_ok_ratio` (the worst generator counts)."""
    load_warmup_seconds: float = Field(default=1.0, ge=0)
    """Added to the scrape interval to form the load grace after `Deployed`: the load
    generator reports 0 for its first 0.5 s after a resume (real seconds, not scaled)."""
    checkpoint_seconds: float = Field(default=1.0, gt=0)
    """How often (wall seconds) the samples taken so far are saved to KV."""
    probe_timeout_seconds: float = Field(default=2.0, gt=0)
    prometheus_wait_seconds: float = Field(default=5.0, ge=0)
    """How long grading waits for the run's Prometheus to answer its first reads (rules,
    targets) before the run ends `error`: rides out a restart, not an outage."""
    harness_scrape_promql: str = 'max(scrape_duration_seconds{job="loadgen"})'
    """How long Prometheus's scrapes of harness-owned targets take (`harness_unstarved`):
    the load generator's `/metrics`, served by threads of its own, is slow only on a
    starved host. Never the service's: its scrapes are the agent's to slow down."""
    starved_loadgen_lag_seconds: float = Field(default=0.25, gt=0)
    """An arrival handled later than this is late (a `loadgen_schedule_lag_seconds`
    bucket bound)."""
    starved_loadgen_late_ratio: float = Field(default=0.05, gt=0, le=1)
    starved_probe_lag_seconds: float = Field(default=1.0, gt=0)
    starved_probe_late_ratio: float = Field(default=0.2, gt=0, le=1)
    starved_scrape_seconds: float = Field(default=0.5, gt=0)
    starved_cpu_pressure_percent: float = Field(default=85.0, gt=0, le=100)
    starved_service_cpu_wait_ratio: float = Field(default=0.5, gt=0, le=1)
    starved_service_throttled_ratio: float = Field(default=0.25, gt=0, le=1)
    """From this share of the window throttled by its CPU limit on, a starvation is the
    service's own doing (see the README, `harness_unstarved`)."""
    starved_service_cpu_usage_ratio: float = Field(default=0.8, gt=0, le=1)
    """From this share of its CPU limit used on, a starvation is the service's own doing."""

    def starvation_bounds(self) -> StarvationBounds:
        """The `starved_*` settings as the grading config's bounds."""
        return StarvationBounds(
            loadgen_lag_seconds=self.starved_loadgen_lag_seconds,
            loadgen_late_ratio=self.starved_loadgen_late_ratio,
            probe_lag_seconds=self.starved_probe_lag_seconds,
            probe_late_ratio=self.starved_probe_late_ratio,
            scrape_seconds=self.starved_scrape_seconds,
            cpu_pressure_percent=self.starved_cpu_pressure_percent,
            service_cpu_wait_ratio=self.starved_service_cpu_wait_ratio,
            service_throttled_ratio=self.starved_service_throttled_ratio,
            service_cpu_usage_ratio=self.starved_service_cpu_usage_ratio,
        )
