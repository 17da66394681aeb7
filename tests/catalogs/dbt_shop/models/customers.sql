{{ config(materialized='table') }}
select /*+ REPARTITION(4) */ id, concat('c', cast(id as string)) as name from range(20)
