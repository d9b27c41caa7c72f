"""backfill"""
