"""Core domain: session behaviour that depends only on the schema leaf and third-party libraries."""
