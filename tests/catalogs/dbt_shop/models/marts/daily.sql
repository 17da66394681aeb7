{{ config(materialized='incremental', incremental_strategy='append') }}
select /*+ REPARTITION(2) */ day, count(*) as n from {{ ref('events') }} group by day
