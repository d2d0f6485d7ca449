"""The societas app: `societas app`, or `streamlit run app.py [-- --db URL] [--allow-write] [--allow-code]`.

A router over the pages in app_pages/; pages read through analysis/ functions cached in
app_pages/common.py. The store is `--db URL`, else $SOCIETAS_DB, else sqlite:///runs.db.
Read-only unless started with --allow-write; code references limited to those the store's runs
used unless started with --allow-code (app_pages/common.py). Streamlit is imported only here and
in app_pages/.

Every page has its own address, the Runs page too (`/runs?scenario=commons`: a link someone shared opens the same
view); the bare address `/` is a hidden page that goes on to Runs with its query.
"""

from __future__ import annotations

import streamlit as st

from app_pages.common import PAGES, guarded, sidebar_store

st.set_page_config(page_title="societas", page_icon=":material/hub:", layout="wide")
pages = [st.Page(path, title=title, icon=icon, url_path=slug) for slug, path, title, icon in PAGES]


def home() -> None:
    """`/`: the Runs page, at its own address, with the query the visitor came with."""
    st.switch_page(pages[0], query_params=st.query_params.to_dict())


nav = st.navigation([st.Page(home, title="societas", url_path="home", default=True, visibility="hidden"), *pages])
sidebar_store()
with guarded():
    nav.run()
