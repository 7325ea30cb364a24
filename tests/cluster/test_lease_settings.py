"""The lease lifetime setting: read from `OCS_LEASE_TTL_MS`, and a malformed one refuses to start the server."""

from __future__ import annotations

import pytest

from opencode_session.core.execution.ownership import DEFAULT_TTL_MS, InvalidLeaseTtl, lease_ttl_ms
from tests.support.server import isolated_env, start_server

pytestmark = pytest.mark.timeout(60)


def test_the_lease_lifetime_reads_whole_milliseconds():
    assert lease_ttl_ms({}) == DEFAULT_TTL_MS
    assert lease_ttl_ms({"OCS_LEASE_TTL_MS": "3000"}) == 3000


@pytest.mark.parametrize("text", ["", "fast", "-5", "299", "1.5", "10s"])
def test_a_malformed_lease_lifetime_is_a_typed_error(text):
    with pytest.raises(InvalidLeaseTtl, match="is not a lease lifetime"):
        lease_ttl_ms({"OCS_LEASE_TTL_MS": text})


def test_a_malformed_lease_lifetime_refuses_to_start_the_server(tmp_path):
    with pytest.raises(RuntimeError, match="OCS_LEASE_TTL_MS='soon' is not a lease lifetime"):
        start_server(tmp_path, env=isolated_env(tmp_path, OCS_LEASE_TTL_MS="soon"))
