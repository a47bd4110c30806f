"""Agencies as data (<agency>.toml) and the rules that turn a canonical Metadata into a valid CSV row for each."""
