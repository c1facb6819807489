"""Airflow triggers: what a deferred task waits on in the triggerer.

==============  =====================================================================
``rcp``         ``RcpJobTrigger``: polls a job of an ``rcpd serve`` service
==============  =====================================================================
"""
