"""The societas app: `streamlit run app.py [-- --db URL]` (or `make app`).

A router over the pages in app_pages/; each page only reads, through analysis/ functions
cached in app_pages/common.py. The store is `--db URL`, else $SOCIETAS_DB, else
sqlite:///runs.db. Streamlit is imported only here and in app_pages/.
"""

from __future__ import annotations

import streamlit as st

from app_pages.common import PAGES, sidebar_store

st.set_page_config(page_title="societas", page_icon=":material/hub:", layout="wide")
nav = st.navigation([st.Page(path, title=title, icon=icon, url_path=slug, default=(slug == "runs"))
                     for slug, path, title, icon in PAGES])
sidebar_store()
nav.run()
