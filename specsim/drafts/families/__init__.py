"""One module per draft family, each implementing ``drafts.family.DraftFamily`` (registered by method name in
``drafts/registry.py``)."""
