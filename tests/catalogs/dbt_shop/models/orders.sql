{{ config(materialized='incremental', incremental_strategy='append', tags=['nightly'],
          meta={'compactor': {'compaction': {'triggers': {'min_input_files': 2}}}}) }}
select /*+ REPARTITION(2) */ id, id * 10 as amount from range(10)
