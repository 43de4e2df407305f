"""Where a run's records go: the message pool (ChromaDB) and MLflow tracking."""

from __future__ import annotations

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from critiquelab.core.config import StrictModel
from critiquelab.experiments.tracking.uris import USE, tracking_uri_problem
from critiquelab.experiments.urls import http_url_problem


class PoolSpec(StrictModel):
    persist: bool = Field(
        default=True,
        description="Persist messages in ChromaDB (under the data directory) so later runs, "
        "trace collection and other machines can read them; false keeps them in memory.",
    )
    chroma_url: str | None = Field(
        default=None, min_length=1,
        description="A Chroma server (`chroma run`) to use instead of the local store."
    )

    @field_validator("chroma_url")
    @classmethod
    def _a_server_address(cls, url: str | None) -> str | None:
        # Chroma's own form is host:port; with a scheme it must be http(s) with a valid port.
        problem = http_url_problem(url if "://" in url else f"http://{url}") if url else None
        if problem:
            raise PydanticCustomError("chroma_url", "'{url}': {problem}", {"url": url, "problem": problem})
        return url


class TrackingSpec(StrictModel):
    uri: str | None = Field(
        default=None, min_length=1,
        description="MLflow tracking URI, e.g. a team's server http://host:5000 (artifacts go where "
        "that server stores them). Default: $MLFLOW_TRACKING_URI, else SQLite under the data "
        "directory.",
    )
    traces: bool = Field(
        default=True,
        description="Log one MLflow trace per problem (role calls, sandbox runs on the visible examples, "
        "every message) linked to its run: the Traces tab of `critiquelab ui`, and what `critiquelab view` "
        "reads while a run is in progress.",
    )

    @field_validator("uri")
    @classmethod
    def _a_store_mlflow_has(cls, uri: str | None) -> str | None:
        problem = tracking_uri_problem(uri) if uri else None
        if problem:
            raise PydanticCustomError("tracking_uri", "'{uri}': {problem}; {use}",
                                      {"uri": uri, "problem": problem, "use": USE})
        return uri
