"""The societas app: `societas app`, or `streamlit run app.py [-- --db URL] [--allow-write] [--allow-code]`.

A router over the pages in app_pages/; pages read through analysis/ functions cached in
app_pages/common.py. The store is `--db URL`, else $SOCIETAS_DB, else sqlite:///runs.db.
Read-only unless started with --allow-write; code references limited to those the store's runs
used unless started with --allow-code (app_pages/common.py). Streamlit is imported only here and
in app_pages/.
"""

from __future__ import annotations

import streamlit as st

from app_pages.common import PAGES, guarded, sidebar_store

st.set_page_config(page_title="societas", page_icon=":material/hub:", layout="wide")
nav = st.navigation([st.Page(path, title=title, icon=icon, url_path=slug, default=(slug == "runs"))
                     for slug, path, title, icon in PAGES])
sidebar_store()
with guarded():
    nav.run()
