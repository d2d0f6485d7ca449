"""Names of the embedded model that are needed without importing torch."""

EMBEDDED_ID = "SmolLM2-135M-Instruct-Q4_1"
