"""deploy/prometheus/alerts.yml names only metrics the bots export, with label values they can take."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from prometheus_client import REGISTRY

from connectors import metrics

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "alerts.yml"
SUFFIXES = ("_total", "_bucket", "_count", "_sum", "_created")


def exported() -> set[str]:
    names = {m.name for m in REGISTRY.collect()}
    return names | {n + s for n in names for s in SUFFIXES}


def test_every_rule_names_a_real_metric_and_real_label_values() -> None:
    rules = [r for g in yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"] for r in g["rules"]]
    assert len(rules) >= 6 and len({r["alert"] for r in rules}) == len(rules)
    allowed = {"outcome": {*metrics.QUESTION_OUTCOMES, *metrics.CITATION_OUTCOMES, *metrics.INGEST_OUTCOMES},
               "reason": set(metrics.INGEST_FAILURE_REASONS), "platform": set(metrics.PLATFORMS)}
    names = exported()
    for rule in rules:
        expr = rule["expr"]
        used = set(re.findall(r"\b(citebot_[a-z_]+)", expr))
        assert used <= names, (rule["alert"], used - names)
        for label, op, value in re.findall(r"(\w+)\s*(=~|=)\s*\"([^\"]*)\"", expr):
            if label in allowed and used:
                values = value.split("|") if op == "=~" else [value]
                assert set(values) <= allowed[label], (rule["alert"], label, values)
        assert rule["annotations"]["summary"] and rule["annotations"]["action"], rule["alert"]
    assert any("kube_job_status_failed" in r["expr"] and "citebot-quality" in r["expr"] for r in rules)
