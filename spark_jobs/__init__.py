"""The Spark audit of brokers' log dirs (`minibroker audit`, or spark-submit spark_jobs/audit.py).

  audit.py       the Spark job: read the log dirs, run the checks, write the report
  options.py     its command line, shared by `minibroker audit` and spark-submit
  log_source.py  the `minibroker-log` Spark data source: brokers' log dirs as DataFrames
  files.py       files of any filesystem the executors can reach, through pyarrow.fs
  checks.py      the checks: pure functions from one partition's rows to findings with their evidence
  report.py      per-partition summaries, the stdout table, report.json and anomalies.parquet

The `minibroker` Spark source and sink (topics read and written through Kafka's protocol, confluent-kafka):

  kafka_source.py    the data source registered as `minibroker`: batch and streaming readers, the writers
  kafka_options.py   its options, with the JVM Kafka connector's names and defaults
  kafka_planning.py  which offsets a batch or micro-batch reads: ranges, minPartitions, maxOffsetsPerTrigger
  kafka_reader.py    the driver's offset lookups and the executors' bounded reads into Arrow batches
  kafka_writer.py    the sink: each task's rows produced by an idempotent producer, or in one transaction
  kafka_ledger.py    the exactly-once sink's ledger topic: the last micro-batch each task partition committed
  task_input.py      whether a writer task's input ended complete or cut short by a failure upstream
  pipeline.py        the example pipeline (`minibroker pipeline`): counts per key per window, topic to topic
"""
