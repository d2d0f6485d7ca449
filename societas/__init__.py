"""The faces of societas, above everything they use: the `societas` command (`societas.cli`), the Python API
that `import sim` resolves (`societas.api`), scenarios as PettingZoo environments (`societas.env`) and the
conformance kit (`societas.testing`)."""
