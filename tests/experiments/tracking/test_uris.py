"""Which tracking URIs are taken before a run starts (MLflow would fail only at the first run)."""

from __future__ import annotations

import importlib.util

import pytest

from critiquelab.experiments.tracking.uris import tracking_uri_problem


@pytest.mark.parametrize("uri", [
    "sqlite:////data/mlflow.db", "sqlite:///relative.db", "http://127.0.0.1:5000", "https://mlflow.example.org",
    "databricks", "databricks://profile", "sqlite+pysqlite:///driver.db",
])
def test_stores_mlflow_can_log_to_are_taken(uri):
    assert tracking_uri_problem(uri) is None


@pytest.mark.parametrize(("uri", "driver"), [
    ("postgresql://u:p@db/mlflow", "psycopg"), ("postgresql+psycopg2://db/m", "psycopg2"),
    ("mysql://db/m", "MySQLdb"),
])
def test_a_database_is_taken_when_its_driver_is_installed(uri, driver):
    """Without its driver MLflow fails at the first logged run, after the model server started."""
    installed = importlib.util.find_spec(driver) is not None
    assert tracking_uri_problem(uri) == (
        None if installed else f"its database driver '{driver}' is not installed in this environment")


@pytest.mark.parametrize(("uri", "why"), [
    ("ftp://x", "no tracking store for scheme 'ftp'"),
    ("mlruns", "file store"),
    ("file:///proc/nope", "file store"),
    ("/abs/path", "file store"),
    ("sqlite://x.db", "three slashes"),
    ("http://", "URL with a host"),
    ("http://exa mple.com", "must not contain spaces"),
    ("http://127.0.0.1:99999", "not a usable URL"),
    ("http://127.0.0.1:port", "not a usable URL"),
    ("http://[::1", "Invalid IPv6 URL"),
    ("postgresql+nosuch://db/m", "not a database URL SQLAlchemy can read (Can't load plugin"),
])
def test_what_mlflow_would_refuse_later_is_named_now(uri, why):
    problem = tracking_uri_problem(uri)
    assert problem is not None and why in problem
