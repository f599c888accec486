"""Setup knowledge shared by the front ends: the shorthand reader (``--init``/``--input``/
``--then`` and their VALUE grammar), the setup checks run before anything is saved or run, and
the suggestions built from what discovery reads in the source. The command line
(:mod:`tensorviz_lsp.cli`) and the language server's features (the setup form, through it the
browser) import it; it imports neither."""
