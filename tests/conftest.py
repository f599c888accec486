"""Shared test configuration.

Tests that need an optional heavy dependency (jax, torch, Chromium, Neovim) are
marked; they skip with a reason when it is missing so the rest of the suite still
says something useful on a partial install. CI installs everything (see .ci/run).
"""
