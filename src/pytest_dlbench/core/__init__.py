"""The contracts every layer shares, at the bottom of the house (docs/architecture.md): the
error types and message rules (errors), the typed readers of untrusted JSON (schema,
untrusted), number formats and units (numbers), the parent-child protocol of a benchmark
process (protocol), atomic file writes (output_files). Nothing here imports another layer."""
