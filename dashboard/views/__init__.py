"""The dashboard's pages (Streamlit scripts run by path); package data of the tracker."""
