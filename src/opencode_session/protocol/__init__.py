"""The API as data: endpoints, request payload models, OpenAPI rendering and the SDK Contract IR.

Imports schema only.
"""

from .api import ENDPOINTS, endpoint
from .endpoint import IMPLICIT_ERRORS, Endpoint, StreamSpec, decode_query, encode_query

__all__ = ["ENDPOINTS", "IMPLICIT_ERRORS", "Endpoint", "StreamSpec", "decode_query", "encode_query", "endpoint"]
