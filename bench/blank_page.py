"""A page that draws a title and nothing from the store: bench/dashboard.py's render reference."""

import streamlit as st

st.set_page_config(page_title="tracker", layout="wide")
st.title("Blank")
st.caption("Streamlit's own cost of one script run under AppTest.")
