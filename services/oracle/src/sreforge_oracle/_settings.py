"""The oracle service's settings (env prefix `SREFORGE_ORACLE_`)."""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from sreforge_contracts import default_use_cases

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
