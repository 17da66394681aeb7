{{ config(materialized='incremental', incremental_strategy='append', partition_by=['day'], tags=['nightly']) }}
-- appended by every run: three files per partition and run
-- compactor: its policy is in models/schema.yml (outside config(): not where the policy is written)
select /*+ REPARTITION(3) */ id, concat('d', cast(id % 2 as string)) as day, {{ var('run', 0) }} as run
from range(30)
