{{ config(materialized='view') }}
select * from {{ ref('events') }}
