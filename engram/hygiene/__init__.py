"""hygiene/ keeps a store healthy: doctor, the secret scan, judgements, consolidation, insights.

``doctor`` checks and repairs a store (``secrets_audit`` is its secret scan; both report
``finding.Finding``), ``judging`` records who found a memory useful, outdated or wrong,
``consolidate`` holds the pure steps that group near-duplicates and plan their merge, and
``curate`` runs them and the trainer's insights over an opened project. It never imports
``engram.agents`` (siblings in docs/layers.toml).
"""
