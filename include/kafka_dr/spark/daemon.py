"""Spark's Python worker daemon for kafka-dr's local-mode jobs (spark.python.daemon.module, set by start_spark):
pyspark's own daemon, run after `prefer_installed_pyspark`, so that each job's workers fork from a daemon that
loaded pyspark's compiled files instead of compiling its zip (the first Spark job of a job: 1.1 s -> 0.4 s here)."""

import runpy

from kafka_dr.spark.installed_pyspark import prefer_installed_pyspark

prefer_installed_pyspark()
runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)
