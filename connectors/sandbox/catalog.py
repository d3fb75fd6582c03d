"""The fixed tables synthetic vehicles are drawn from: manufacturers by WMI, their models and trims."""
from __future__ import annotations

# WMI -> (make, manufacturer, country of assembly)
WMI: dict[str, tuple[str, str, str]] = {
    "1FA": ("Ford", "Ford Motor Company", "United States"),
    "1FT": ("Ford", "Ford Motor Company", "United States"),
    "1FM": ("Ford", "Ford Motor Company", "United States"),
    "1G1": ("Chevrolet", "General Motors LLC", "United States"),
    "1GC": ("Chevrolet", "General Motors LLC", "United States"),
    "3GC": ("Chevrolet", "General Motors LLC", "Mexico"),
    "1HG": ("Honda", "American Honda Motor Co., Inc.", "United States"),
    "2HG": ("Honda", "Honda of Canada Mfg.", "Canada"),
    "JHM": ("Honda", "Honda Motor Co., Ltd.", "Japan"),
    "1N4": ("Nissan", "Nissan North America, Inc.", "United States"),
    "JN1": ("Nissan", "Nissan Motor Co., Ltd.", "Japan"),
    "2T1": ("Toyota", "Toyota Motor Manufacturing Canada", "Canada"),
    "4T1": ("Toyota", "Toyota Motor Manufacturing Kentucky", "United States"),
    "5TD": ("Toyota", "Toyota Motor Manufacturing Indiana", "United States"),
    "JTD": ("Toyota", "Toyota Motor Corporation", "Japan"),
    "3VW": ("Volkswagen", "Volkswagen de Mexico", "Mexico"),
    "WVW": ("Volkswagen", "Volkswagen AG", "Germany"),
    "5YJ": ("Tesla", "Tesla, Inc.", "United States"),
    "KMH": ("Hyundai", "Hyundai Motor Company", "South Korea"),
    "KNA": ("Kia", "Kia Corporation", "South Korea"),
    "WBA": ("BMW", "BMW AG", "Germany"),
    "WDD": ("Mercedes-Benz", "Mercedes-Benz AG", "Germany"),
    "WAU": ("Audi", "Audi AG", "Germany"),
    "SAL": ("Land Rover", "Jaguar Land Rover Limited", "United Kingdom"),
    "VF1": ("Renault", "Renault S.A.S.", "France"),
    "ZFA": ("Fiat", "Stellantis Europe S.p.A.", "Italy"),
    "YV1": ("Volvo", "Volvo Car Corporation", "Sweden"),
    "1C4": ("Jeep", "FCA US LLC", "United States"),
    "1C6": ("Ram", "FCA US LLC", "United States"),
    "5NP": ("Hyundai", "Hyundai Motor Manufacturing Alabama", "United States"),
    "4S4": ("Subaru", "Subaru of Indiana Automotive", "United States"),
    "JF1": ("Subaru", "Subaru Corporation", "Japan"),
}

# make -> list of (model, body type, first model year, base MSRP USD, trims)
MODELS: dict[str, list[tuple[str, str, int, int, list[str]]]] = {
    "Ford": [("F-150", "Pickup", 1997, 42000, ["XL", "XLT", "Lariat", "Platinum"]),
             ("Escape", "SUV", 2001, 29000, ["S", "SE", "Titanium"]),
             ("Mustang", "Coupe", 1997, 33000, ["EcoBoost", "GT", "Mach 1"]),
             ("Explorer", "SUV", 1997, 38000, ["Base", "XLT", "Limited", "ST"])],
    "Chevrolet": [("Silverado 1500", "Pickup", 1999, 41000, ["WT", "LT", "RST", "High Country"]),
                  ("Malibu", "Sedan", 1997, 26000, ["LS", "RS", "LT"]),
                  ("Equinox", "SUV", 2005, 29000, ["LS", "LT", "Premier"]),
                  ("Tahoe", "SUV", 1997, 58000, ["LS", "LT", "Z71", "Premier"])],
    "Honda": [("Civic", "Sedan", 1997, 25000, ["LX", "Sport", "EX", "Touring"]),
              ("Accord", "Sedan", 1997, 29000, ["LX", "EX", "Sport", "Touring"]),
              ("CR-V", "SUV", 1997, 31000, ["LX", "EX", "EX-L", "Touring"]),
              ("Odyssey", "Minivan", 1999, 39000, ["LX", "EX", "Touring", "Elite"])],
    "Nissan": [("Altima", "Sedan", 1997, 27000, ["S", "SV", "SR", "SL"]),
               ("Rogue", "SUV", 2008, 30000, ["S", "SV", "SL", "Platinum"]),
               ("Frontier", "Pickup", 1998, 32000, ["S", "SV", "PRO-4X"])],
    "Toyota": [("Camry", "Sedan", 1997, 28000, ["LE", "SE", "XLE", "XSE"]),
               ("Corolla", "Sedan", 1997, 23000, ["L", "LE", "SE", "XSE"]),
               ("RAV4", "SUV", 1997, 31000, ["LE", "XLE", "Adventure", "Limited"]),
               ("Tacoma", "Pickup", 1997, 33000, ["SR", "SR5", "TRD Sport", "Limited"]),
               ("Highlander", "SUV", 2001, 40000, ["L", "LE", "XLE", "Platinum"])],
    "Volkswagen": [("Jetta", "Sedan", 1997, 23000, ["S", "SE", "SEL"]),
                   ("Tiguan", "SUV", 2009, 30000, ["S", "SE", "SEL R-Line"]),
                   ("Golf", "Hatchback", 1997, 25000, ["S", "SE", "GTI"])],
    "Tesla": [("Model 3", "Sedan", 2017, 42000, ["Standard Range", "Long Range", "Performance"]),
              ("Model Y", "SUV", 2020, 47000, ["Long Range", "Performance"]),
              ("Model S", "Sedan", 2012, 80000, ["Long Range", "Plaid"])],
    "Hyundai": [("Elantra", "Sedan", 1997, 22000, ["SE", "SEL", "Limited"]),
                ("Tucson", "SUV", 2005, 29000, ["SE", "SEL", "Limited"]),
                ("Santa Fe", "SUV", 2001, 33000, ["SE", "SEL", "Calligraphy"])],
    "Kia": [("Sorento", "SUV", 2003, 32000, ["LX", "S", "EX", "SX"]),
            ("Forte", "Sedan", 2010, 21000, ["LXS", "GT-Line", "GT"]),
            ("Sportage", "SUV", 1997, 28000, ["LX", "EX", "SX"])],
    "BMW": [("3 Series", "Sedan", 1997, 45000, ["330i", "330i xDrive", "M340i"]),
            ("X5", "SUV", 2000, 66000, ["sDrive40i", "xDrive40i", "M60i"]),
            ("5 Series", "Sedan", 1997, 58000, ["530i", "540i xDrive", "M550i"])],
    "Mercedes-Benz": [("C-Class", "Sedan", 1997, 47000, ["C 300", "C 300 4MATIC", "AMG C 43"]),
                      ("GLE", "SUV", 2016, 62000, ["GLE 350", "GLE 450", "AMG GLE 53"]),
                      ("E-Class", "Sedan", 1997, 58000, ["E 350", "E 450 4MATIC"])],
    "Audi": [("A4", "Sedan", 1997, 42000, ["Premium", "Premium Plus", "Prestige"]),
             ("Q5", "SUV", 2009, 46000, ["Premium", "Premium Plus", "Prestige"])],
    "Land Rover": [("Range Rover Sport", "SUV", 2006, 84000, ["SE", "Dynamic SE", "Autobiography"]),
                   ("Defender", "SUV", 2020, 58000, ["S", "X-Dynamic SE", "X"])],
    "Renault": [("Clio", "Hatchback", 1997, 19000, ["Evolution", "Techno", "Esprit Alpine"]),
                ("Megane", "Hatchback", 1997, 24000, ["Equilibre", "Techno", "Iconic"])],
    "Fiat": [("500", "Hatchback", 2008, 18000, ["Pop", "Lounge", "Abarth"]),
             ("Panda", "Hatchback", 2003, 15000, ["Easy", "Cross"])],
    "Volvo": [("XC60", "SUV", 2009, 46000, ["Core", "Plus", "Ultimate"]),
              ("XC90", "SUV", 2003, 58000, ["Core", "Plus", "Ultimate"])],
    "Jeep": [("Wrangler", "SUV", 1997, 36000, ["Sport", "Sahara", "Rubicon"]),
             ("Grand Cherokee", "SUV", 1997, 42000, ["Laredo", "Limited", "Overland", "Summit"])],
    "Ram": [("1500", "Pickup", 2011, 43000, ["Tradesman", "Big Horn", "Laramie", "Limited"])],
    "Subaru": [("Outback", "Wagon", 1997, 31000, ["Base", "Premium", "Limited", "Touring"]),
               ("Forester", "SUV", 1998, 29000, ["Base", "Premium", "Sport", "Limited"])],
}

MAKE_BY_LOWER = {make.lower(): make for make in MODELS}

ENGINES = {
    "Sedan": [("2.0L L4 DOHC 16V", "4", "Gasoline"), ("2.5L L4 DOHC 16V", "4", "Gasoline"),
              ("1.5L L4 Turbo", "4", "Gasoline"), ("2.0L L4 Hybrid", "4", "Hybrid")],
    "SUV": [("2.5L L4 DOHC 16V", "4", "Gasoline"), ("3.5L V6 DOHC 24V", "6", "Gasoline"),
            ("2.0L L4 Turbo", "4", "Gasoline"), ("2.5L L4 Plug-in Hybrid", "4", "Hybrid")],
    "Pickup": [("3.5L V6 Turbo", "6", "Gasoline"), ("5.0L V8 DOHC 32V", "8", "Gasoline"),
               ("3.0L V6 Turbo Diesel", "6", "Diesel")],
    "Coupe": [("2.3L L4 Turbo", "4", "Gasoline"), ("5.0L V8 DOHC 32V", "8", "Gasoline")],
    "Hatchback": [("1.0L L3 Turbo", "3", "Gasoline"), ("1.4L L4 Turbo", "4", "Gasoline")],
    "Minivan": [("3.5L V6 DOHC 24V", "6", "Gasoline")],
    "Wagon": [("2.5L H4 DOHC 16V", "4", "Gasoline"), ("2.4L H4 Turbo", "4", "Gasoline")],
}
ELECTRIC_MAKES = {"Tesla"}

COLORS = {
    "Exterior": ["Super White", "Midnight Black Metallic", "Celestial Silver Metallic", "Magnetic Gray",
                 "Ruby Flare Pearl", "Blueprint", "Army Green", "Sonic Red"],
    "Interior": ["Black Cloth", "Ash Leather", "Graphite SofTex", "Macadamia Leather"],
}

EQUIPMENT = ["abs_brakes", "air_conditioning", "cruise_control", "navigation_aid", "power_windows",
             "keyless_entry", "tilt_steering", "leather_seat", "sunroof", "heated_seats",
             "backup_camera", "blind_spot_monitor", "lane_departure_warning", "adaptive_cruise_control",
             "tire_pressure_monitor", "traction_control", "remote_start", "third_row_seat"]

US_STATES = ["AL", "AK", "AZ", "AR", "CA", "CO", "CT", "DE", "DC", "FL", "GA", "HI", "ID", "IL", "IN",
             "IA", "KS", "KY", "LA", "ME", "MD", "MA", "MI", "MN", "MS", "MO", "MT", "NE", "NV", "NH",
             "NJ", "NM", "NY", "NC", "ND", "OH", "OK", "OR", "PA", "RI", "SC", "SD", "TN", "TX", "UT",
             "VT", "VA", "WA", "WV", "WI", "WY"]
AU_STATES = ["NSW", "VIC", "QLD", "WA", "SA", "TAS", "ACT", "NT"]
CA_PROVINCES = ["AB", "BC", "MB", "NB", "NL", "NS", "NT", "NU", "ON", "PE", "QC", "SK", "YT"]

# Countries the v2 plate decoder covers (60+, ISO 3166-1 alpha-2).
PLATE_COUNTRIES = set("""US CA MX AU NZ GB IE FR DE ES PT IT NL BE LU CH AT DK SE NO FI IS PL CZ SK HU SI HR
RO BG GR CY MT EE LV LT UA TR IL AE SA QA KW BH OM ZA NG KE EG MA IN PK BD LK MY SG TH ID PH JP KR BR AR CL
CO PE UY""".split())
