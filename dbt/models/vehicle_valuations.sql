-- Each roster vehicle (the published database) with its valuation history (the Parquet lake): how many
-- valuations, in how many months, and the latest month's. An example joining both sources.
select
    v.vin,
    v.unit_number,
    v.make,
    v.model,
    v.retail as latest_retail,
    count(mv.valued_on) as valuations,
    count(distinct mv.valued_month) as months_valued,
    max(mv.valued_month) as latest_valued_month
from {{ source('fleet', 'vehicle_overview') }} as v
left join {{ source('fleet_lake', 'market_values') }} as mv on mv.vin = v.vin
group by all
