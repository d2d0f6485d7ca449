"""The Streamlit app pages, run by app.py through st.navigation."""
