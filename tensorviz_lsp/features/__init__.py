"""Language-server features, one module each (see :mod:`tensorviz_lsp.feature`)."""
