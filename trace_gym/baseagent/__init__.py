"""The embedded base agent: pretrained weights fetched from a package registry and converted
once (`weights`), and the SFT warm start on oracle demonstrations of the targets (`build`)."""
