"""Which MLflow tracking URIs a run can log to, checked before anything starts: MLflow itself
finds out only when the first run is created (a traceback, with the data directory's locks
already taken)."""

from __future__ import annotations

from critiquelab.experiments.urls import http_url_problem

# SQLAlchemy dialects MLflow's SQL store takes (a driver may follow: postgresql+psycopg2).
_DATABASES = ("sqlite", "postgresql", "mysql", "mssql")
USE = "use sqlite:///PATH, http(s)://HOST[:PORT] (a tracking server), databricks or a database URL"


def tracking_uri_problem(uri: str) -> str | None:
    """Why ``uri`` cannot hold this harness's runs, or None when it can."""
    if uri == "databricks":
        return None
    scheme = uri.split(":", 1)[0].lower() if ":" in uri else ""
    if scheme in ("http", "https"):
        problem = http_url_problem(uri)
        return f"not a usable URL ({problem})" if problem else None
    if scheme == "databricks":
        return None
    if scheme.split("+", 1)[0] in _DATABASES:
        if scheme == "sqlite" and not uri.startswith("sqlite:///"):
            return "a SQLite URI is sqlite:///PATH (three slashes, then the file)"
        return None if scheme == "sqlite" else _database_problem(uri)
    if scheme in ("", "file") or len(scheme) == 1:  # a path (or a Windows drive letter)
        return "MLflow's file store keeps no traces or SQL state this harness needs"
    return f"MLflow has no tracking store for scheme '{scheme}'"


def _database_problem(uri: str) -> str | None:
    """Why SQLAlchemy could not open the database at ``uri``: a URL it cannot read, or a driver
    not installed here (otherwise found only when the first run is logged, after the model
    server has started). Whether the database answers is left to its first connection."""
    from sqlalchemy.engine.url import make_url
    from sqlalchemy.exc import SQLAlchemyError

    try:
        make_url(uri).get_dialect().import_dbapi()
    except ModuleNotFoundError as exc:
        return f"its database driver '{exc.name}' is not installed in this environment"
    except (SQLAlchemyError, ValueError) as exc:
        return f"not a database URL SQLAlchemy can read ({exc})"
    return None
