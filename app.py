"""Streamlit entry point: `streamlit run app.py`.

A placeholder until the app issue lands: it lists the stored runs read-only. Streamlit is
imported only here (and, later, in the app's pages).
"""

from __future__ import annotations

import os


def main() -> None:
    import streamlit as st

    from sim.store import Store

    st.set_page_config(page_title="societas", layout="wide")
    st.title("societas runs")
    url = st.sidebar.text_input("database", os.environ.get("SOCIETAS_DB", "sqlite:///runs.db"))
    runs = Store(url).list_runs()
    st.dataframe([{"run_id": r.id, "scenario": r.scenario, "status": r.status, "seed": r.seed, "ticks": r.ticks,
                   "policy": r.policy} for r in runs])


if __name__ == "__main__":
    main()
